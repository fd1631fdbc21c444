// Package wal is the Go client of the WAL platform: it hands mutations to a namespace's
// write-ahead log through the producers' WriteToLog and WriteToLogBatch calls and answers each
// with the platform's Trilean, retrying as clients/BEHAVIOUR.md says every client library does.
//
//	client, err := wal.New([]string{"127.0.0.1:50051"}, wal.Options{})
//	...
//	res, err := client.Write(ctx, wal.Write{Namespace: "orders", Key: "order-17", Payload: body})
//	var refused *wal.RefusedError
//	switch {
//	case errors.As(err, &refused): // the request is wrong: refused.Code, refused.Field
//	case err != nil: // the client is closed
//	case res.Outcome == wal.True: // on the queue, delivered at least once
//	case res.Outcome == wal.False: // not stored; retrying is the caller's choice
//	default: // wal.Unknown: still unknown at the deadline
//	}
//
// The generated gRPC and protobuf code is in the walv1 package.
package wal

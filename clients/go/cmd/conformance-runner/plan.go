package main

// The plan of clients/conformance/README.md, read from standard input.

type plan struct {
	Producers []string `json:"producers"`
	TLS       *planTLS `json:"tls"`
	Steps     []step   `json:"steps"`
}

// planTLS is the plan's mTLS files, when the case writes to the secured producer.
type planTLS struct {
	CA          string `json:"ca"`
	Certificate string `json:"certificate"`
	Key         string `json:"key"`
	Domain      string `json:"domain"`
}

type step struct {
	Op             string      `json:"op"` // write, transaction, commit, abort
	Namespace      string      `json:"namespace"`
	Concurrent     bool        `json:"concurrent"`
	Batch          bool        `json:"batch"`
	DeadlineMillis int64       `json:"deadline_millis"`
	PaceMillis     int64       `json:"pace_millis"`
	Writes         []planWrite `json:"writes"`
	TransactionID  string      `json:"transaction_id"`
	Chunk          int         `json:"chunk"`
	Items          []planItem  `json:"items"`
	ItemCount      uint64      `json:"item_count"`
}

type planWrite struct {
	Key           string `json:"key"`
	Payload       string `json:"payload"`
	IdempotencyID string `json:"idempotency_id"`
	DelayMillis   int64  `json:"delay_millis"`
	// AwaitDestinationsMillis: the write waits this long for its destinations (0: not).
	AwaitDestinationsMillis int64 `json:"await_destinations_millis"`
}

type planItem struct {
	Payload string `json:"payload"`
}

// result is one line of standard output.
type result struct {
	Step          int     `json:"step"`
	Index         int     `json:"index"`
	Outcome       string  `json:"outcome"`
	EntryID       string  `json:"entry_id,omitempty"`
	Attempts      int     `json:"attempts,omitempty"`
	Code          string  `json:"code,omitempty"`
	Field         *string `json:"field,omitempty"` // present (maybe empty) for REFUSED
	ElapsedMillis int64   `json:"elapsed_millis"`
	Message       string  `json:"message,omitempty"`
	// Destinations: what each destination had done, for a write that awaited them.
	Destinations map[string]string `json:"destinations,omitempty"`
}

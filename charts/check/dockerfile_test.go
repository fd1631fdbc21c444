package main

// The repository's Dockerfile, held to the rules the chart relies on (no container builder can
// pull base images on the machines CI runs on, so the image is not built here): a build stage
// and a runtime stage, pinned base images, the binaries the chart runs, and an unprivileged
// numeric user, as the chart's runAsNonRoot requires.

import (
	"os"
	"strings"
	"testing"
)

func TestTheDockerfileBuildsInStagesAndRunsAsAnUnprivilegedUser(t *testing.T) {
	text, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms, users []string
	for _, line := range strings.Split(string(text), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			froms = append(froms, fields[1])
		case "USER":
			users = append(users, fields[1])
		}
	}
	if len(froms) < 2 {
		t.Fatalf("stages %v: want a build stage and a runtime stage", froms)
	}
	for _, image := range froms {
		if !strings.Contains(image, ":") || strings.HasSuffix(image, ":latest") {
			t.Errorf("base image %q is not pinned to a tag", image)
		}
	}
	if len(users) == 0 {
		t.Fatal("no USER: the image would run as root")
	}
	user := strings.Split(users[len(users)-1], ":")[0]
	if user == "0" || user == "root" || strings.Trim(user, "0123456789") != "" {
		t.Errorf("final USER %q: want a numeric unprivileged uid (the chart's runAsNonRoot checks a number)", user)
	}
	for _, binary := range []string{"wal-producer", "wal-consumer", "wal-control-plane", "walctl", "wal-writer"} {
		if !strings.Contains(string(text), "target/release/"+binary) {
			t.Errorf("the image does not carry %s, which the chart runs", binary)
		}
	}
}

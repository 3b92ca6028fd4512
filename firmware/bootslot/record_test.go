package bootslot

import (
	"strings"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	r := Record{State: StateFailed, From: "a", To: "b", FromVersion: "v1", ToVersion: "v2",
		Reason: strings.Repeat("configd restarted 4 times\n", 20), WaitFor: []string{"eth0", "eth2"}, Restored: true, Snapshot: true}
	b := r.encode()
	if len(b) > maxRecord {
		t.Fatalf("record is %d bytes, the ADV leaves %d", len(b), maxRecord)
	}
	back := decodeRecord(b)
	if back.State != r.State || back.From != "a" || back.To != "b" || back.ToVersion != "v2" || !back.Restored || !back.Snapshot ||
		strings.Join(back.WaitFor, ",") != "eth0,eth2" || !strings.HasPrefix(back.Reason, "configd restarted 4 times configd") || !strings.HasSuffix(back.Reason, "...") {
		t.Fatalf("round trip: %+v", back)
	}
	if m := back.Message("v1"); !strings.HasPrefix(m, "upgrade to v2 failed: configd restarted") || !strings.HasSuffix(m, "; running v1") {
		t.Fatalf("message %q", m)
	}
}

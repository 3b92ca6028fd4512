package supervisor

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzRequest feeds the server's reading, decoding and answering arbitrary
// bytes, as a client on the socket could send them. The server must answer
// each with exactly one of a result and an error on one line, never panic
// (answer turns a panic into an "internal error" answer, which fails here),
// reach the power hook only for a reboot or poweroff request and the
// console hook only with a standard speed; and every request it accepts
// must survive a round trip through the client's encoding.
func FuzzRequest(f *testing.F) {
	for _, seed := range []string{
		`{"op":"services"}` + "\n",
		`{"op":"service","name":"netd"}`,
		`{"op":"logs","name":"kernel","lines":50}` + "\n",
		`{"op":"restart","name":"console"}` + "\n",
		`{"op":"stop","name":"kernel"}` + "\n",
		`{"op":"system"}` + "\n",
		`{"op":"syslog","syslog":{"addr":"","network":"udp"}}` + "\n",
		`{"op":"console-baud","baud":38400}` + "\n",
		`{"op":"console-baud","baud":-1}` + "\n",
		`{"op":"reboot"}` + "\n",
		`{"op":"poweroff"}` + "\n",
		`{"op":"stop-petting"}` + "\n",
		`{"op":"services","name":"x"}` + "\n",
		`{"op":"reboot"} {"op":"poweroff"}` + "\n",
		`{"OP":"reboot"}` + "\n",
		`{"op":"reboot","op":"services"}` + "\n",
		"null\n", "[]\n", "\n", "",
		`{"op":"logs","name":"\u0000","lines":1e3}`,
		"GET /v1/services HTTP/1.1\r\n",
	} {
		f.Add([]byte(seed))
	}
	var powered []PowerAction
	var bauds []int
	s, err := New(Config{
		Power:       func(a PowerAction) error { powered = append(powered, a); return nil },
		ConsoleBaud: func(baud int) error { bauds = append(bauds, baud); return nil },
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		line, err := readRequest(iotest.OneByteReader(bytes.NewReader(data)))
		want, _, _ := bytes.Cut(data, []byte("\n"))
		switch {
		case len(want) > maxRequestBytes:
			if err == nil {
				t.Fatalf("readRequest accepted a line of %d bytes", len(want))
			}
			return
		case err != nil || !bytes.Equal(line, want):
			t.Fatalf("readRequest(%q) = %q, %v; want %q", data, line, err, want)
		}

		req, decodeErr := decodeRequest(line)
		if decodeErr == nil {
			enc, err := json.Marshal(req)
			if err != nil {
				t.Fatalf("encode %+v: %v", req, err)
			}
			again, err := decodeRequest(enc)
			if err != nil || !reflect.DeepEqual(again, req) {
				t.Fatalf("request %q decoded to %+v, which encodes as %s and decodes to %+v, %v", line, req, enc, again, err)
			}
			if req.Op == opSyslog && req.Syslog.Addr != "" {
				return // never send logs to an address the fuzzer made up
			}
		}

		powered, bauds = powered[:0], bauds[:0]
		resp := s.answer(line, nil)
		if strings.HasPrefix(resp.Error, "internal error") {
			t.Fatalf("request %q: %s", line, resp.Error)
		}
		if (resp.Error == "") == (len(resp.Result) == 0) {
			t.Fatalf("request %q: answer %+v, want exactly one of a result and an error", line, resp)
		}
		if decodeErr != nil && resp.Error != decodeErr.Error() {
			t.Fatalf("request %q: answer %+v, want the decoding error %q", line, resp, decodeErr)
		}
		if len(powered) > 0 && (decodeErr != nil || (req.Op != opReboot && req.Op != opPowerOff) || len(powered) != 1 || string(powered[0]) != string(req.Op)) {
			t.Fatalf("request %q reached the power hook with %v", line, powered)
		}
		if len(bauds) > 0 && (len(bauds) != 1 || !slices.Contains(ConsoleBauds, bauds[0])) {
			t.Fatalf("request %q reached the console hook with %v", line, bauds)
		}
		var out bytes.Buffer
		if err := writeResponse(&out, resp); err != nil || bytes.Count(out.Bytes(), []byte("\n")) != 1 || !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
			t.Fatalf("request %q: answer written as %q, %v; want one line", line, out.Bytes(), err)
		}
	})
}

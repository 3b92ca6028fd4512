package configd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/flashgate/flashgate/internal/localapi"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/firmware/upgrade"
	"github.com/flashgate/flashgate/upgrade/imagefile"
)

// Firmware upgrades for the web UI. The web UI runs as its own user and
// cannot open the card's boot partition, so configd, which runs as root
// and owns the card, writes the slots for it (WithFirmware; served on the
// restricted socket on the box). Every check of firmware/upgrade runs
// here, on the bytes configd itself reads: the web UI only relays the
// upload, and its own opinion of the file counts for nothing.
//
//	GET  /v1/firmware          FirmwareView: slots, default, trusted keys, an upload in progress
//	POST /v1/firmware/check    body: the file's first bytes (64 KiB at most); ?size=N
//	                           ?confirm_downgrade=1; FirmwarePlan: what it is, whether the box takes it
//	POST /v1/firmware          body: the whole file, streamed (Content-Length required);
//	                           ?confirm_downgrade=1; FirmwarePlan once written and armed
//
// A refusal answers the FirmwarePlan with its Error and a 4xx status (409
// downgrade or busy, 403 signature, 422 not an image / wrong board / too
// big / wrong size). The body is streamed into the inactive slot as it
// arrives (64 KiB at a time), never held whole: the image is as big as a
// fifth of a 128 MB board's RAM.

// FirmwareSource is the card and the running firmware, for WithFirmware.
type FirmwareSource struct {
	Open    func() (*bootslot.Card, error) // the boot partition (bootslot.OpenBox)
	Running upgrade.Running                // from the kernel command line, read by configd
	Status  string                         // PID 1's status file (bootslot.StatusPath)
	// WaitFor lists the interfaces the new firmware's test boot must get
	// back (those with an IPv4 address now); nil: none.
	WaitFor func() []string
}

// WithFirmware serves the firmware routes from src.
func WithFirmware(src FirmwareSource) ServerOption {
	return func(s *Server) { s.firmware = &firmwareState{src: src} }
}

// firmwareState is the source and the upload in progress, if any.
type firmwareState struct {
	src      FirmwareSource
	mu       sync.Mutex
	progress *upgrade.Progress
}

func (s *Server) firmwareRoutes() {
	if s.firmware == nil {
		return
	}
	s.mux.HandleFunc("GET /v1/firmware", func(w http.ResponseWriter, r *http.Request) {
		localapi.WriteJSON(w, http.StatusOK, s.firmware.view())
	})
	s.mux.HandleFunc("POST /v1/firmware/check", s.firmwareCheck)
	s.mux.HandleFunc("POST /v1/firmware", s.requirePassword(s.firmwareInstall))
}

func (f *firmwareState) view() configdapi.FirmwareView {
	src := f.src
	v := configdapi.FirmwareView{Running: src.Running}
	f.mu.Lock()
	if p := f.progress; p != nil {
		cp := *p
		v.Upload = &cp
	}
	f.mu.Unlock()
	if b, err := os.ReadFile(src.Status); err == nil {
		var st bootslot.Status
		if json.Unmarshal(b, &st) == nil {
			v.Boot, v.Message = &st, st.Message
		}
	}
	if src.Open == nil {
		v.Error = "this box has no boot partition with A/B slots"
		return v
	}
	if v.Upload != nil {
		return v // the card is busy with the upload
	}
	card, err := src.Open()
	if err != nil {
		v.Error = err.Error()
		return v
	}
	defer card.Close()
	boot, err := bootslot.ReadBoot(card.Vol)
	if err != nil {
		v.Error = err.Error()
	}
	v.DefaultSlot = boot.Committed
	if v.Message == "" {
		v.Message = boot.Last.Message(src.Running.Version)
	}
	for _, name := range []string{"a", "b"} {
		v.Slots = append(v.Slots, upgrade.ReadSlot(card, name))
	}
	if t, err := upgrade.Trust(card); err == nil {
		v.AcceptsUnsigned = t.AllowUnsigned
		for _, k := range t.Keys {
			v.TrustedKeys = append(v.TrustedKeys, imagefile.Fingerprint(k))
		}
	} else if v.Error == "" {
		v.Error = err.Error()
	}
	return v
}

func planOf(p upgrade.Plan, h *imagefile.Header) configdapi.FirmwarePlan {
	if h == nil {
		return configdapi.FirmwarePlan{}
	}
	m := h.Manifest
	plan := configdapi.FirmwarePlan{Version: m.Version, Board: m.Board, Built: m.Built,
		Signer: h.SignerName(), Target: p.Target, Downgrade: p.Downgrade, Size: h.Size()}
	if !config.ReadsDBFormat(m.ConfigDBFormats()) && slices.Contains(m.ConfigDBFormats(), 2) {
		plan.Config = fmt.Sprintf("%s reads configuration database format 2 only: before its test boot the database is rewritten in format 2, "+
			"with the running configuration and its history, and nothing can be committed until the reboot; back on this firmware it becomes format %d again.",
			m.Version, config.DBFormat)
	}
	return plan
}

// configProblem says why the firmware of m could not read the
// configuration ("" when it can, converted or not).
func configProblem(m imagefile.Manifest) string {
	formats, schema := m.ConfigDBFormats(), m.ConfigSchema()
	if schema < config.SchemaVersion {
		return fmt.Sprintf("%s reads configurations up to schema %d, and this one is schema %d: it could not read it and would start from the defaults", m.Version, schema, config.SchemaVersion)
	}
	if !config.ReadsDBFormat(formats) && !slices.Contains(formats, 2) {
		return fmt.Sprintf("%s reads configuration database formats %v, none that this firmware can write", m.Version, formats)
	}
	return ""
}

// FirmwareStatus is the HTTP status for a refusal of firmware/upgrade.
func FirmwareStatus(err error) int {
	switch {
	case errors.Is(err, upgrade.ErrDowngrade), errors.Is(err, upgrade.ErrBusy):
		return http.StatusConflict
	case errors.Is(err, imagefile.ErrUnsigned), errors.Is(err, imagefile.ErrUntrusted), errors.Is(err, imagefile.ErrSignature):
		return http.StatusForbidden
	case errors.Is(err, imagefile.ErrNotImage), errors.Is(err, imagefile.ErrTruncated), errors.Is(err, imagefile.ErrCorrupt),
		errors.Is(err, upgrade.ErrBoard), errors.Is(err, upgrade.ErrTooBig), errors.Is(err, upgrade.ErrSize):
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

func (s *Server) firmwareCheck(w http.ResponseWriter, r *http.Request) {
	src := s.firmware.src
	if src.Open == nil {
		localapi.WriteJSON(w, http.StatusNotImplemented, configdapi.FirmwarePlan{Error: "this box has no boot partition with A/B slots"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		localapi.WriteJSON(w, http.StatusRequestEntityTooLarge, configdapi.FirmwarePlan{Error: "send only the file's first bytes (64 KiB at most): " + err.Error()})
		return
	}
	h, err := imagefile.ReadHeader(bytes.NewReader(body))
	if err != nil {
		localapi.WriteJSON(w, FirmwareStatus(err), configdapi.FirmwarePlan{Error: err.Error()})
		return
	}
	size := int64(-1)
	if v := r.URL.Query().Get("size"); v != "" {
		if size, err = strconv.ParseInt(v, 10, 64); err != nil {
			localapi.WriteJSON(w, http.StatusBadRequest, configdapi.FirmwarePlan{Error: "size: not a number"})
			return
		}
	}
	card, err := src.Open()
	if err != nil {
		localapi.WriteJSON(w, http.StatusConflict, configdapi.FirmwarePlan{Error: err.Error()})
		return
	}
	defer card.Close()
	p, err := upgrade.Check(card, h, src.Running, upgrade.Options{Size: size, AllowDowngrade: r.URL.Query().Get("confirm_downgrade") == "1"})
	plan := planOf(p, h)
	if err == nil {
		if problem := configProblem(h.Manifest); problem != "" {
			plan.Error = problem
			localapi.WriteJSON(w, http.StatusConflict, plan)
			return
		}
	}
	if err != nil {
		plan.Error = err.Error()
		localapi.WriteJSON(w, FirmwareStatus(err), plan)
		return
	}
	localapi.WriteJSON(w, http.StatusOK, plan)
}

func (s *Server) firmwareInstall(w http.ResponseWriter, r *http.Request) {
	f := s.firmware
	src := f.src
	if src.Open == nil {
		localapi.WriteJSON(w, http.StatusNotImplemented, configdapi.FirmwarePlan{Error: "this box has no boot partition with A/B slots"})
		return
	}
	if r.ContentLength < 0 {
		localapi.WriteJSON(w, http.StatusLengthRequired, configdapi.FirmwarePlan{Error: "send the file with a Content-Length: it is checked against the manifest before anything is written"})
		return
	}
	f.mu.Lock()
	if f.progress != nil {
		f.mu.Unlock()
		localapi.WriteJSON(w, http.StatusConflict, configdapi.FirmwarePlan{Error: "another upload is being written"})
		return
	}
	f.progress = &upgrade.Progress{Stage: "check"}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.progress = nil
		f.mu.Unlock()
	}()
	card, err := src.Open()
	if err != nil {
		localapi.WriteJSON(w, http.StatusConflict, configdapi.FirmwarePlan{Error: err.Error()})
		return
	}
	defer card.Close()
	var waitFor []string
	if src.WaitFor != nil {
		waitFor = src.WaitFor()
	}
	// Install reads the header from the body, checks it (signature
	// against the card's keys, board, size, downgrade, the card's state)
	// and only then writes, 64 KiB at a time, verifying each part's hash.
	// Before it arms the slot, the database is made one the firmware
	// reads (a downgrade to one that reads only format 2).
	converted := false
	p, err := upgrade.Install(card, r.Body, src.Running, upgrade.Options{
		BeforeArm: func(m imagefile.Manifest) error {
			resp, err := s.handOffTo(m.ConfigDBFormats(), m.ConfigSchema())
			converted = resp.Converted
			return err
		},
		Size:           r.ContentLength,
		AllowDowngrade: r.URL.Query().Get("confirm_downgrade") == "1",
		WaitFor:        waitFor,
		Progress: func(pr upgrade.Progress) {
			f.mu.Lock()
			f.progress = &pr
			f.mu.Unlock()
		},
	})
	plan := planOf(p, p.Header)
	if err != nil && converted {
		if terr := s.store.TakeBack(); terr != nil {
			err = fmt.Errorf("%w; %v", err, terr)
		}
	}
	if err != nil {
		plan.Error = err.Error()
		s.logf("configd: firmware upgrade refused or failed: %v", err)
		localapi.WriteJSON(w, FirmwareStatus(err), plan)
		return
	}
	s.logf("configd: firmware %s (signer %s) written to slot %s; test boot armed", plan.Version, plan.Signer, plan.Target)
	localapi.WriteJSON(w, http.StatusOK, plan)
}

// AddressedInterfaces are the interfaces with a global IPv4 address now:
// the new firmware's test boot must get them back (FirmwareSource.WaitFor
// on the box).
func AddressedInterfaces() []string {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []string
	for _, ifc := range ifs {
		// Tunnels' own devices come and go with their peers.
		if ifc.Flags&net.FlagLoopback != 0 || strings.HasPrefix(ifc.Name, "tun") || strings.HasPrefix(ifc.Name, "xfrm") ||
			strings.HasPrefix(ifc.Name, "ipsec") || strings.HasPrefix(ifc.Name, "wg") {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLinkLocalUnicast() {
				out = append(out, ifc.Name)
				break
			}
		}
	}
	return out
}

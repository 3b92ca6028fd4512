package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/firmware/upgrade"
	"github.com/flashgate/flashgate/upgrade/imagefile"
)

// Firmware upgrades through the JSON API (the System page's upload uses
// the same routes from app.js):
//
//	GET  /api/v1/upgrade           UpgradeView: slots, default, last upgrade, an upload in progress
//	POST /api/v1/upgrade/inspect   body: the file's first bytes (a header is under 3 KiB);
//	                               UpgradePlan: what the file is and whether the box takes it
//	POST /api/v1/upgrade           body: the whole .fgup (Content-Length required);
//	                               ?confirm_downgrade=1 installs an older build, ?reboot=0 does
//	                               not reboot into the test boot at once
//
// Nothing is written unless the header passes every check; the body is
// streamed into the inactive slot, never held in memory.

// UpgradeSource is where the upgrade routes find the card and the running
// firmware. The box's is the boot partition found by its label.
type UpgradeSource struct {
	Open    func() (*bootslot.Card, error)
	Running upgrade.Running
	Status  string // PID 1's status file (bootslot.StatusPath)
}

// UpgradeView is GET /api/v1/upgrade.
type UpgradeView struct {
	Running         upgrade.Running   `json:"running"`
	DefaultSlot     string            `json:"default_slot"`
	Slots           []upgrade.Slot    `json:"slots"`
	AcceptsUnsigned bool              `json:"accepts_unsigned"`
	TrustedKeys     []string          `json:"trusted_keys"`
	Boot            *bootslot.Status  `json:"boot,omitempty"` // what PID 1 found and is checking
	Message         string            `json:"message,omitempty"`
	MessageClass    string            `json:"-"`                // the System page's style for it
	Upload          *upgrade.Progress `json:"upload,omitempty"` // an upload being written now
	Error           string            `json:"error,omitempty"`
}

// UpgradePlan answers inspect and the upload.
type UpgradePlan struct {
	Version   string `json:"version"`
	Board     string `json:"board"`
	Built     int64  `json:"built"`
	Signer    string `json:"signer"`
	Target    string `json:"target_slot,omitempty"`
	Downgrade bool   `json:"downgrade"`
	Size      int64  `json:"size"`
	Error     string `json:"error,omitempty"` // why the box refuses it
	Rebooting bool   `json:"rebooting,omitempty"`
}

// upgradeState is the upload in progress, if any.
type upgradeState struct {
	mu       sync.Mutex
	progress *upgrade.Progress
	trust    sync.Once
	unsigned bool // the card accepts unsigned firmware (upgrade.pub never changes)
}

// firmwareNotes are the dashboard's warnings about firmware: a failed
// upgrade, a test boot in progress, a box that takes unsigned images.
func (s *Server) firmwareNotes() []string {
	src := s.opts.Upgrade
	var notes []string
	if b, err := os.ReadFile(src.Status); err == nil {
		var st bootslot.Status
		if json.Unmarshal(b, &st) == nil && st.Last != nil && st.Last.State != bootslot.StateCommitted && st.Message != "" {
			notes = append(notes, st.Message)
		}
	}
	s.upgrade.trust.Do(func() {
		if src.Open == nil {
			return
		}
		if card, err := src.Open(); err == nil {
			if t, err := upgrade.Trust(card); err == nil {
				s.upgrade.unsigned = t.AllowUnsigned
			}
			card.Close()
		}
	})
	if s.upgrade.unsigned {
		notes = append(notes, "This box accepts unsigned firmware (a developer's card): anyone with the admin password can install any firmware. Re-flash it with a signed image for use in the field.")
	}
	return notes
}

func (s *Server) upgradeRoutes(api func(path, method string, h http.HandlerFunc)) {
	api("/upgrade", "GET", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.upgradeView())
	})
	api("/upgrade/inspect", "POST", s.upgradeInspect)
	api("/upgrade", "POST", s.upgradeUpload)
}

func (s *Server) upgradeView() UpgradeView {
	src := s.opts.Upgrade
	v := UpgradeView{Running: src.Running}
	s.upgrade.mu.Lock()
	if p := s.upgrade.progress; p != nil {
		cp := *p
		v.Upload = &cp
	}
	s.upgrade.mu.Unlock()
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
		return v // the card is locked by the upload
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
	v.MessageClass = "flash"
	if v.Boot != nil && v.Boot.Last != nil && v.Boot.Last.State != bootslot.StateCommitted {
		v.MessageClass = "flash error"
	}
	return v
}

func planOf(p upgrade.Plan, h *imagefile.Header) UpgradePlan {
	if h == nil {
		return UpgradePlan{}
	}
	return UpgradePlan{Version: h.Manifest.Version, Board: h.Manifest.Board, Built: h.Manifest.Built,
		Signer: h.SignerName(), Target: p.Target, Downgrade: p.Downgrade, Size: h.Size()}
}

// upgradeStatus is the HTTP status for a refusal.
func upgradeStatus(err error) int {
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

func (s *Server) upgradeInspect(w http.ResponseWriter, r *http.Request) {
	src := s.opts.Upgrade
	if src.Open == nil {
		writeAPIError(w, http.StatusNotImplemented, "this box has no boot partition with A/B slots")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		writeAPIError(w, http.StatusRequestEntityTooLarge, "send only the file's first bytes (64 KiB at most): "+err.Error())
		return
	}
	h, err := imagefile.ReadHeader(bytes.NewReader(body))
	if err != nil {
		writeJSON(w, upgradeStatus(err), UpgradePlan{Error: err.Error()})
		return
	}
	size := int64(-1)
	if v := r.URL.Query().Get("size"); v != "" {
		if size, err = strconv.ParseInt(v, 10, 64); err != nil {
			writeAPIError(w, http.StatusBadRequest, "size: not a number")
			return
		}
	}
	card, err := src.Open()
	if err != nil {
		writeAPIError(w, http.StatusConflict, err.Error())
		return
	}
	defer card.Close()
	p, err := upgrade.Check(card, h, src.Running, upgrade.Options{Size: size, AllowDowngrade: r.URL.Query().Get("confirm_downgrade") == "1"})
	plan := planOf(p, h)
	if err != nil {
		plan.Error = err.Error()
		writeJSON(w, upgradeStatus(err), plan)
		return
	}
	writeJSON(w, http.StatusOK, plan)
}

func (s *Server) upgradeUpload(w http.ResponseWriter, r *http.Request) {
	src := s.opts.Upgrade
	if src.Open == nil {
		writeAPIError(w, http.StatusNotImplemented, "this box has no boot partition with A/B slots")
		return
	}
	if r.ContentLength < 0 {
		writeAPIError(w, http.StatusLengthRequired, "send the file with a Content-Length: the box checks it against the manifest before writing")
		return
	}
	// A large file on a slow link takes longer than the server's
	// defaults allow.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(30 * time.Minute))
	rc.SetWriteDeadline(time.Now().Add(31 * time.Minute))
	s.upgrade.mu.Lock()
	if s.upgrade.progress != nil {
		s.upgrade.mu.Unlock()
		writeAPIError(w, http.StatusConflict, "another upload is being written")
		return
	}
	s.upgrade.progress = &upgrade.Progress{Stage: "check"}
	s.upgrade.mu.Unlock()
	defer func() {
		s.upgrade.mu.Lock()
		s.upgrade.progress = nil
		s.upgrade.mu.Unlock()
	}()
	card, err := src.Open()
	if err != nil {
		writeAPIError(w, http.StatusConflict, err.Error())
		return
	}
	defer card.Close()
	body := r.Body // bounded by requireCSRF (maxFirmwareBody), and by the manifest
	p, err := upgrade.Install(card, body, src.Running, upgrade.Options{
		Size:           r.ContentLength,
		AllowDowngrade: r.URL.Query().Get("confirm_downgrade") == "1",
		WaitFor:        addressedInterfaces(),
		Progress: func(pr upgrade.Progress) {
			s.upgrade.mu.Lock()
			s.upgrade.progress = &pr
			s.upgrade.mu.Unlock()
		},
	})
	plan := planOf(p, p.Header)
	if err != nil {
		plan.Error = err.Error()
		s.opts.Logf("upgrade: %v", err)
		writeJSON(w, upgradeStatus(err), plan)
		return
	}
	s.opts.Logf("upgrade: %s (signer %s) written to slot %s; test boot armed", plan.Version, plan.Signer, plan.Target)
	card.Close()
	if r.URL.Query().Get("reboot") != "0" {
		plan.Rebooting = true
		go func() {
			time.Sleep(time.Second) // let the answer out first
			// Not the request's context: it ends with the answer.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.doReboot(ctx); err != nil {
				s.opts.Logf("upgrade: reboot into the test boot: %v", err)
			}
		}()
	}
	writeJSON(w, http.StatusOK, plan)
}

// addressedInterfaces are the interfaces with a global IPv4 address now:
// the new firmware's test boot must get them back.
func addressedInterfaces() []string {
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

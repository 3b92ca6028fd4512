package webui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/flashgate/flashgate/internal/localapi"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/firmware/bootslot"
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
// Nothing is written unless the header passes every check (in configd);
// the body is streamed into the inactive slot, never held in memory. The
// upload needs the current password in the X-Flashgate-Password header.

// The web UI runs as its own user and cannot open the card: configd,
// which runs as root, reads the slots, checks the files and writes them
// (services/configd/firmware.go). The UI relays the upload as it arrives,
// and reboots through the supervisor once configd has armed the test boot.

// UpgradeSource says where the upgrade routes find the firmware's state.
type UpgradeSource struct {
	// Firmware is configd's firmware API (on the box, the web UI's
	// configd socket); nil: the routes say this box has none.
	Firmware *configdapi.Client
	// Status is PID 1's status file (bootslot.StatusPath, world-readable),
	// for the dashboard's notes.
	Status string
}

// UpgradeView is GET /api/v1/upgrade: configd's view, and the System
// page's style for its message.
type UpgradeView struct {
	configdapi.FirmwareView
	MessageClass string `json:"-"`
}

// UpgradePlan answers inspect and the upload (configd's, relayed).
type UpgradePlan = configdapi.FirmwarePlan

// upgradeState is what the UI remembers of the card.
type upgradeState struct {
	mu       sync.Mutex
	known    bool // unsigned is known
	unsigned bool // the card accepts unsigned firmware (upgrade.pub never changes)
}

// firmwareNotes are the dashboard's warnings about firmware: a failed
// upgrade, a test boot in progress, a box that takes unsigned images.
func (s *Server) firmwareNotes(ctx context.Context) []string {
	src := s.opts.Upgrade
	var notes []string
	if b, err := os.ReadFile(src.Status); err == nil {
		var st bootslot.Status
		if json.Unmarshal(b, &st) == nil && st.Last != nil && st.Last.State != bootslot.StateCommitted && st.Message != "" {
			notes = append(notes, st.Message)
		}
	}
	s.upgrade.mu.Lock()
	known := s.upgrade.known
	s.upgrade.mu.Unlock()
	if !known && src.Firmware != nil {
		// Asked once, as the card's keys never change while it runs.
		if v, err := src.Firmware.Firmware(ctx); err == nil {
			s.upgrade.mu.Lock()
			s.upgrade.known, s.upgrade.unsigned = true, v.AcceptsUnsigned
			s.upgrade.mu.Unlock()
		}
	}
	s.upgrade.mu.Lock()
	unsigned := s.upgrade.unsigned
	s.upgrade.mu.Unlock()
	if unsigned {
		notes = append(notes, "This box accepts unsigned firmware (a developer's card): anyone with the admin password can install any firmware. Re-flash it with a signed image for use in the field.")
	}
	return notes
}

func (s *Server) upgradeRoutes(api func(path, method string, h http.HandlerFunc)) {
	api("/upgrade", "GET", func(w http.ResponseWriter, r *http.Request) {
		localapi.WriteJSON(w, http.StatusOK, s.upgradeView(r.Context()))
	})
	api("/upgrade/inspect", "POST", s.upgradeInspect)
	api("/upgrade", "POST", s.upgradeUpload)
}

func (s *Server) upgradeView(ctx context.Context) UpgradeView {
	fw := s.opts.Upgrade.Firmware
	if fw == nil {
		return UpgradeView{FirmwareView: configdapi.FirmwareView{Error: "this box has no boot partition with A/B slots"}}
	}
	fv, err := fw.Firmware(ctx)
	if err != nil {
		fv.Error = "configd: " + err.Error()
	}
	v := UpgradeView{FirmwareView: fv, MessageClass: "flash"}
	if v.Boot != nil && v.Boot.Last != nil && v.Boot.Last.State != bootslot.StateCommitted {
		v.MessageClass = "flash error"
	}
	return v
}

// upgradeStatus is the HTTP status to answer for an error of configd's
// firmware API: its own for a refusal.
func upgradeStatus(err error) int {
	var apiErr *configdapi.APIError
	if errors.As(err, &apiErr) && apiErr.Status >= 400 {
		return apiErr.Status
	}
	return http.StatusBadGateway
}

func (s *Server) upgradeInspect(w http.ResponseWriter, r *http.Request) {
	fw := s.opts.Upgrade.Firmware
	if fw == nil {
		localapi.WriteError(w, http.StatusNotImplemented, "this box has no boot partition with A/B slots")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		localapi.WriteError(w, http.StatusRequestEntityTooLarge, "send only the file's first bytes (64 KiB at most): "+err.Error())
		return
	}
	size := int64(-1)
	if v := r.URL.Query().Get("size"); v != "" {
		if size, err = strconv.ParseInt(v, 10, 64); err != nil {
			localapi.WriteError(w, http.StatusBadRequest, "size: not a number")
			return
		}
	}
	plan, err := fw.CheckFirmware(r.Context(), body, size, r.URL.Query().Get("confirm_downgrade") == "1")
	if err != nil {
		if plan.Error == "" {
			plan.Error = err.Error()
		}
		localapi.WriteJSON(w, upgradeStatus(err), plan)
		return
	}
	localapi.WriteJSON(w, http.StatusOK, plan)
}

func (s *Server) upgradeUpload(w http.ResponseWriter, r *http.Request) {
	fw := s.opts.Upgrade.Firmware
	if fw == nil {
		localapi.WriteError(w, http.StatusNotImplemented, "this box has no boot partition with A/B slots")
		return
	}
	if r.ContentLength < 0 {
		localapi.WriteError(w, http.StatusLengthRequired, "send the file with a Content-Length: the box checks it against the manifest before writing")
		return
	}
	// The current password is in reauthHeader (the body is the file);
	// configd checks it again.
	password, msg, status := s.reauthPassword(r, "firmware upgrade", "")
	if msg != "" {
		localapi.WriteError(w, status, msg)
		return
	}
	fw = fw.WithPassword(sessionOf(r).User, password)
	// A large file on a slow link takes longer than the server's
	// defaults allow.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(30 * time.Minute))
	rc.SetWriteDeadline(time.Now().Add(31 * time.Minute))
	// The body (bounded by requireCSRF: maxFirmwareBody, and by the
	// manifest) goes to configd as it arrives; configd checks the header
	// before it writes anything.
	plan, err := fw.InstallFirmware(r.Context(), r.Body, r.ContentLength, r.URL.Query().Get("confirm_downgrade") == "1")
	if err != nil {
		if plan.Error == "" {
			plan.Error = err.Error()
		}
		s.opts.Logf("upgrade: %v", err)
		localapi.WriteJSON(w, upgradeStatus(err), plan)
		return
	}
	s.opts.Logf("upgrade: %s (signer %s) written to slot %s by configd; test boot armed", plan.Version, plan.Signer, plan.Target)
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
	localapi.WriteJSON(w, http.StatusOK, plan)
}

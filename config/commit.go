package config

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The candidate is one shared draft, as on VyOS: every editor sees every
// other editor's changes. Each change gives it a new etag; an edit or a
// commit that names an etag is refused with ErrCandidateChanged if the
// candidate changed since, so two admins cannot commit each other's half
// edits unknowingly. An empty etag skips the check (single-writer tools).

// Candidate returns a copy of the candidate and its etag.
func (s *Store) Candidate() (*Config, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.candidate.Clone(), s.etagLocked()
}

func (s *Store) etagLocked() string { return fmt.Sprintf("%s-%d", s.etagBase, s.etagSeq) }

func (s *Store) checkEtagLocked(etag string) error {
	if s.closed {
		return ErrClosed
	}
	if s.handedOff {
		return ErrHandedOff
	}
	if etag != "" && etag != s.etagLocked() {
		return ErrCandidateChanged
	}
	return nil
}

func (s *Store) replaceCandidateLocked(c *Config) string {
	c.normalize()
	return s.setCandidateLocked(c, encoded{})
}

// setCandidateLocked makes c, normalized, whose JSON is enc (or the zero
// encoded when not known yet), the candidate.
func (s *Store) setCandidateLocked(c *Config, enc encoded) string {
	s.candidate, s.candidateEnc = c, enc
	s.etagSeq++
	return s.etagLocked()
}

// EditCandidate runs fn on a copy of the candidate and, if fn succeeds,
// makes the copy the candidate. It returns the new etag.
func (s *Store) EditCandidate(etag string, fn func(*Config) error) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkEtagLocked(etag); err != nil {
		return "", err
	}
	c := s.candidate.Clone()
	if err := fn(c); err != nil {
		return "", err
	}
	c.normalize()
	// Encoded once here for the size check, and kept: the commit stores
	// this document.
	enc, err := encodeConfig(c)
	if err != nil {
		return "", err
	}
	if len(enc.doc) > MaxDocumentSize {
		return "", sizeError(len(enc.doc))
	}
	return s.setCandidateLocked(c, enc), nil
}

// ReplaceCandidate makes c the candidate.
func (s *Store) ReplaceCandidate(etag string, c *Config) (string, error) {
	c = c.Clone()
	return s.EditCandidate(etag, func(cand *Config) error { *cand = *c; return nil })
}

// SetPath sets one value of the candidate (see Config.Set).
func (s *Store) SetPath(etag, path string, values ...string) (string, error) {
	return s.EditCandidate(etag, func(c *Config) error { return c.Set(path, values...) })
}

// DeletePath deletes one value or element of the candidate (see Config.Delete).
func (s *Store) DeletePath(etag, path string) (string, error) {
	return s.EditCandidate(etag, func(c *Config) error { return c.Delete(path) })
}

// PatchCandidate applies a JSON merge patch (RFC 7396) to the candidate.
func (s *Store) PatchCandidate(etag string, patch []byte) (string, error) {
	return s.EditCandidate(etag, func(c *Config) error {
		p, err := c.MergePatch(patch)
		if err != nil {
			return err
		}
		*c = *p
		return nil
	})
}

// DiscardCandidate throws the candidate's changes away.
func (s *Store) DiscardCandidate() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replaceCandidateLocked(s.running.Clone())
}

// CommitOptions are the parameters of CommitWith.
type CommitOptions struct {
	Who     string
	Message string
	// Etag, when set, must match the candidate's (see Candidate).
	Etag string
	// ConfirmWithin, when non-zero, makes this a commit-confirmed: unless
	// Confirm is called in time, the previous configuration comes back by
	// itself, even across a restart or a reboot.
	ConfirmWithin time.Duration
}

// Commit validates the candidate and makes it the running configuration, in
// one transaction, recording who, when, why and which sections changed. A
// plain commit while a commit-confirmed is pending also confirms it.
func (s *Store) Commit(who, message string) (RevisionInfo, error) {
	return s.CommitWith(CommitOptions{Who: who, Message: message})
}

// CommitConfirmed is Commit that rolls back by itself unless Confirm is
// called within timeout. A second CommitConfirmed inside the window extends
// it; the rollback still goes to the configuration from before the first.
func (s *Store) CommitConfirmed(who, message string, timeout time.Duration) (RevisionInfo, error) {
	return s.CommitWith(CommitOptions{Who: who, Message: message, ConfirmWithin: timeout})
}

// MaxConfirmWindow bounds commit-confirmed timeouts.
const MaxConfirmWindow = 24 * time.Hour

// CommitWith is Commit with all the options.
func (s *Store) CommitWith(o CommitOptions) (RevisionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkEtagLocked(o.Etag); err != nil {
		return RevisionInfo{}, err
	}
	if o.ConfirmWithin < 0 || o.ConfirmWithin > MaxConfirmWindow {
		return RevisionInfo{}, fmt.Errorf("confirm timeout %v out of range (up to %v)", o.ConfirmWithin, MaxConfirmWindow)
	}
	if err := s.candidate.Validate(); err != nil {
		return RevisionInfo{}, err
	}
	enc := s.candidateEnc
	if enc.sections == nil {
		var err error
		if enc, err = encodeConfig(s.candidate); err != nil {
			return RevisionInfo{}, err
		}
	}
	if len(enc.doc) > MaxDocumentSize {
		return RevisionInfo{}, sizeError(len(enc.doc))
	}
	running, err := s.runningEncodedLocked()
	if err != nil {
		return RevisionInfo{}, err
	}
	sections := changedSections(running, enc)
	if len(sections) == 0 {
		return RevisionInfo{}, ErrNoChanges
	}
	reason := "commit"
	var pending *Pending
	if o.ConfirmWithin > 0 {
		reason = "commit-confirmed"
		pending = &Pending{RollbackTo: s.runningRev, Deadline: s.opts.Clock.Now().Add(o.ConfirmWithin).UTC(),
			Window: o.ConfirmWithin, Who: o.Who}
		if s.pending != nil {
			pending.RollbackTo = s.pending.RollbackTo
		}
	}
	// The candidate itself becomes the running configuration: neither is
	// ever changed in place (an edit changes a copy and installs it), so
	// they can share it until the next edit.
	return s.applyLocked(s.candidate, enc, reason, o.Who, o.Message, sections, pending, s.runningRev)
}

// runningEncodedLocked is the running configuration's JSON, encoded once
// per running configuration.
func (s *Store) runningEncodedLocked() (encoded, error) {
	if s.runningEnc.sections == nil {
		enc, err := encodeConfig(s.running)
		if err != nil {
			return encoded{}, err
		}
		s.runningEnc = enc
	}
	return s.runningEnc, nil
}

// applyLocked writes cfg, whose JSON is enc, as the next revision and makes
// it running, with pending as the new commit-confirmed state (nil clears
// it). shares are revisions whose parts it may share (writeRevision).
func (s *Store) applyLocked(cfg *Config, enc encoded, reason, who, message string, sections []Section, pending *Pending, shares ...uint64) (RevisionInfo, error) {
	if who == "" {
		who = "unknown"
	}
	var info RevisionInfo
	err := s.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		info = RevisionInfo{Revision: getUint(meta, keyNext), Who: who, When: s.opts.Clock.Now().UTC(),
			Message: message, Sections: sections, Reason: reason, Schema: SchemaVersion}
		if pending != nil {
			pending.Revision = info.Revision
			js, err := json.Marshal(pending)
			if err != nil {
				return err
			}
			if err := meta.Put(keyPending, js); err != nil {
				return err
			}
		} else if err := meta.Delete(keyPending); err != nil {
			return err
		}
		return s.writeRevision(tx, meta, info, enc.doc, shares...)
	})
	if err != nil {
		return RevisionInfo{}, fmt.Errorf("commit: %w", err)
	}
	s.setRunningLocked(cfg, info.Revision, enc)
	s.setPendingLocked(pending)
	s.notifyLocked(Change{Revision: info.Revision, Sections: sections, Reason: reason, Who: who, Message: message, When: info.When})
	return info, nil
}

// setRunningLocked makes cfg, whose JSON is enc (or unknown yet, the zero
// encoded), the running configuration as revision rev.
func (s *Store) setRunningLocked(cfg *Config, rev uint64, enc encoded) {
	s.running, s.runningRev, s.runningEnc = cfg, rev, enc
}

func (s *Store) setPendingLocked(p *Pending) {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.pending = p
	if p != nil {
		s.armPending()
	}
}

// armPending starts the timer for s.pending; an expired deadline fires at
// once (this is how a reboot inside the window ends in a rollback).
func (s *Store) armPending() {
	p := *s.pending
	d := p.Deadline.Sub(s.opts.Clock.Now())
	if d < 0 {
		d = 0
	}
	// A board without a battery-backed clock boots in 1970 until NTP
	// answers: the deadline then looks decades away. Never wait longer
	// than the window the admin asked for.
	if p.Window > 0 && d > p.Window {
		d = p.Window
	}
	s.timer = s.opts.Clock.AfterFunc(d, func() { s.confirmExpired(p) })
}

// confirmExpired rolls back the unconfirmed commit p.
func (s *Store) confirmExpired(p Pending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.pending == nil || s.pending.Revision != p.Revision {
		return // confirmed, superseded or closed meanwhile
	}
	info, err := s.rollbackLocked(p.RollbackTo, "flashgate", "confirm-timeout",
		fmt.Sprintf("revision %d was not confirmed in time: back to revision %d", p.Revision, p.RollbackTo))
	if err != nil {
		// Keep the pending state (it is still in the database) and try
		// again: giving up would leave the admin locked out.
		s.opts.Logf("config: rollback of unconfirmed revision %d failed, retrying in 10s: %v", p.Revision, err)
		s.timer = s.opts.Clock.AfterFunc(10*time.Second, func() { s.confirmExpired(p) })
		return
	}
	s.opts.Logf("config: revision %d not confirmed by %s: rolled back as revision %d", p.Revision, p.Deadline.Format(time.RFC3339), info.Revision)
}

// Confirm keeps a commit made with CommitConfirmed.
func (s *Store) Confirm() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.pending == nil {
		return ErrNothingPending
	}
	if err := s.update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyPending) }); err != nil {
		return fmt.Errorf("confirm: %w", err)
	}
	s.setPendingLocked(nil)
	return nil
}

// Rollback makes the configuration of revision rev running again, as a new
// revision. The candidate is reset to it; a pending confirmation is
// cancelled.
func (s *Store) Rollback(rev uint64, who string) (RevisionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return RevisionInfo{}, ErrClosed
	}
	return s.rollbackLocked(rev, who, "rollback", fmt.Sprintf("rollback to revision %d", rev))
}

func (s *Store) rollbackLocked(rev uint64, who, reason, message string) (RevisionInfo, error) {
	var cfg *Config
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		_, cfg, err = readRecord(tx, rev)
		return err
	})
	if err != nil {
		return RevisionInfo{}, fmt.Errorf("rollback: %w", err)
	}
	// A manual rollback is validated like any commit (the rules may have
	// tightened since); the automatic one is not: it restores what was
	// running, and refusing would leave the admin locked out.
	if reason == "rollback" {
		if err := cfg.Validate(); err != nil {
			return RevisionInfo{}, fmt.Errorf("rollback to revision %d: that configuration no longer validates:\n%w", rev, err)
		}
	}
	enc, err := encodeConfig(cfg)
	if err != nil {
		return RevisionInfo{}, fmt.Errorf("rollback: %w", err)
	}
	running, err := s.runningEncodedLocked()
	if err != nil {
		return RevisionInfo{}, fmt.Errorf("rollback: %w", err)
	}
	sections := changedSections(running, enc)
	info, err := s.applyLocked(cfg, enc, reason, who, message, sections, nil, s.runningRev, rev)
	if err != nil {
		return RevisionInfo{}, err
	}
	s.replaceCandidateLocked(cfg.Clone())
	return info, nil
}

// FactoryReset replaces the running configuration with the defaults and
// erases the history (it holds secrets). The revision number keeps
// counting so that subscribers see a new revision.
//
// Deleting the history inside the database would not erase it: bbolt
// does not zero the pages it frees, and an old revision with its keys and
// password hashes could be inflated out of the file. So the defaults go
// into a new file, the old file and every set-aside database are
// overwritten with zeros where they lie, and the new file is renamed into
// place (see eraseAndWriteFresh).
func (s *Store) FactoryReset(who string) (RevisionInfo, error) {
	return s.factoryReset(who, false)
}

// EraseSecrets is a factory reset that keeps what is not secret: the
// running configuration without its admin accounts and without its
// tunnels (a tunnel is not valid without its pre-shared key) becomes the
// only revision, and everything else is erased as by FactoryReset. The
// console's recovery uses it: whoever sets a new password at the serial
// port must not get the old secrets with it.
func (s *Store) EraseSecrets(who string) (RevisionInfo, error) {
	return s.factoryReset(who, true)
}

// WithoutSecrets is c without admin accounts and tunnels, the parts of a
// configuration that hold secrets.
func WithoutSecrets(c *Config) *Config {
	out := c.Clone()
	out.System.Admins = nil
	out.Tunnels = nil
	return out
}

func (s *Store) factoryReset(who string, keepSettings bool) (RevisionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return RevisionInfo{}, ErrClosed
	}
	cfg := s.opts.Defaults()
	message := "factory reset"
	if keepSettings {
		cfg = WithoutSecrets(s.running)
		if err := cfg.Validate(); err != nil {
			return RevisionInfo{}, fmt.Errorf("erase secrets: the configuration without its accounts and tunnels is not valid, so only a full factory reset can erase them:\n%w", err)
		}
		message = "secrets erased (accounts, tunnels, history and stored files); the other settings kept"
	}
	cfg.normalize()
	sections := ChangedSections(s.running, cfg)
	if who == "" {
		who = "unknown"
	}
	var next uint64
	if err := s.view(func(tx *bolt.Tx) error {
		next = getUint(tx.Bucket(bucketMeta), keyNext)
		return nil
	}); err != nil {
		return RevisionInfo{}, fmt.Errorf("factory reset: %w", err)
	}
	info := RevisionInfo{Revision: next, Who: who, When: s.opts.Clock.Now().UTC(),
		Message: message, Sections: sections, Reason: "factory-reset", Schema: SchemaVersion}
	if err := s.eraseAndWriteFresh(info, cfg); err != nil {
		return RevisionInfo{}, fmt.Errorf("factory reset: %w", err)
	}
	s.setRunningLocked(cfg, info.Revision, encoded{})
	s.setPendingLocked(nil)
	s.replaceCandidateLocked(cfg.Clone())
	s.notifyLocked(Change{Revision: info.Revision, Sections: sections, Reason: "factory-reset", Who: who, Message: info.Message, When: info.When})
	return info, nil
}

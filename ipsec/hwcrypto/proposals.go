package hwcrypto

import (
	"sort"
	"strconv"
	"strings"
)

// cipherAlg is one encryption algorithm of a proposal, as a mode of a block
// cipher with a key size: "aes128gcm16" is {aes, gcm, 128}.
type cipherAlg struct {
	cipher  string
	mode    string
	keyBits int
}

// parseProposal splits a strongSwan proposal string ("aes128gcm16-prfsha256-ecp256",
// "aes256-sha256-modp2048", "3des-sha1") into its encryption algorithms and
// its integrity algorithms. Tokens that are neither (PRFs, DH groups, esn)
// are ignored; unknown ciphers (camellia, chacha20poly1305) are kept with
// cipher set to the token so that they count as not accelerated.
func parseProposal(p string) (ciphers []cipherAlg, integs []string) {
	for _, tok := range strings.Split(strings.ToLower(strings.TrimSpace(p)), "-") {
		switch {
		case tok == "":
		case tok == "3des":
			ciphers = append(ciphers, cipherAlg{"3des", "cbc", 192})
		case tok == "des":
			ciphers = append(ciphers, cipherAlg{"des", "cbc", 64})
		case strings.HasPrefix(tok, "aes") && !strings.HasPrefix(tok, "aesxcbc") && !strings.HasPrefix(tok, "aescmac"):
			if c, ok := parseAES(tok); ok {
				ciphers = append(ciphers, c)
			}
		case isIntegrity(tok):
			integs = append(integs, canonicalHash(tok))
		case strings.HasPrefix(tok, "prf"), strings.HasPrefix(tok, "modp"), strings.HasPrefix(tok, "ecp"),
			strings.HasPrefix(tok, "curve"), strings.HasPrefix(tok, "x25519"), strings.HasPrefix(tok, "x448"),
			strings.HasPrefix(tok, "ke"), strings.HasPrefix(tok, "mlkem"),
			tok == "esn", tok == "noesn", strings.HasPrefix(tok, "brainpool"):
		default:
			ciphers = append(ciphers, cipherAlg{cipher: tok})
		}
	}
	return ciphers, integs
}

// parseAES reads aes, aes128, aes256ctr, aes128gcm16, aes192ccm8, aes256gmac.
func parseAES(tok string) (cipherAlg, bool) {
	rest := strings.TrimPrefix(tok, "aes")
	c := cipherAlg{cipher: "aes", mode: "cbc", keyBits: 128}
	digits := 0
	for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
		digits++
	}
	if digits > 0 {
		n, err := strconv.Atoi(rest[:digits])
		if err != nil || (n != 128 && n != 192 && n != 256) {
			return cipherAlg{}, false
		}
		c.keyBits = n
		rest = rest[digits:]
	}
	for _, m := range []string{"gcm", "ccm", "ctr", "gmac", "cbc"} {
		if strings.HasPrefix(rest, m) {
			c.mode = m
			rest = rest[len(m):]
			break
		}
	}
	for _, r := range rest { // ICV length, e.g. the 16 of gcm16
		if r < '0' || r > '9' {
			return cipherAlg{}, false
		}
	}
	return c, true
}

func isIntegrity(tok string) bool {
	for _, p := range []string{"sha1", "sha2_", "sha256", "sha384", "sha512", "md5", "aesxcbc", "aescmac"} {
		if strings.HasPrefix(tok, p) {
			return true
		}
	}
	return false
}

// canonicalHash maps sha2_256, sha256_96 and the like to the hash name.
func canonicalHash(tok string) string {
	tok = strings.Replace(tok, "sha2_", "sha", 1)
	for _, h := range []string{"sha1", "sha256", "sha384", "sha512", "md5"} {
		if strings.HasPrefix(tok, h) {
			return h
		}
	}
	return tok
}

func (s *engineSpec) does(c cipherAlg) bool {
	for _, cc := range s.ciphers {
		if cc.cipher != c.cipher {
			continue
		}
		modeOK, keyOK := false, false
		for _, m := range cc.modes {
			modeOK = modeOK || m == c.mode
		}
		for _, k := range cc.keyBits {
			keyOK = keyOK || k == c.keyBits
		}
		if modeOK && keyOK {
			return true
		}
	}
	return false
}

func (r *Report) cipherEngine(c cipherAlg) string {
	for _, e := range r.Engines {
		if e.State == Usable && e.spec != nil && e.spec.does(c) {
			return e.Name
		}
	}
	return ""
}

func (r *Report) hashEngine(h string) string {
	for _, e := range r.Engines {
		if e.State != Usable || e.spec == nil {
			continue
		}
		for _, eh := range e.spec.hashes {
			if eh == h {
				return e.Name
			}
		}
	}
	return ""
}

// Accelerated reports whether a usable engine does the encryption of a
// proposal, and which. A proposal listing several encryption algorithms is
// accelerated only if all of them are, since the peer picks one. Integrity
// done in hardware (PadLock PHE) does not make a proposal accelerated on its
// own, because the cipher is what limits throughput; Rank uses it to order.
func (r *Report) Accelerated(proposal string) (bool, string) {
	ciphers, _ := parseProposal(proposal)
	if len(ciphers) == 0 {
		return false, ""
	}
	engine := ""
	for _, c := range ciphers {
		e := r.cipherEngine(c)
		if e == "" {
			return false, ""
		}
		if engine == "" {
			engine = e
		}
	}
	return true, engine
}

// Ranked is one proposal after ranking.
type Ranked struct {
	Proposal    string `json:"proposal"`
	Accelerated bool   `json:"accelerated"`
	Engine      string `json:"engine,omitempty"`      // engine doing the encryption
	HashEngine  string `json:"hash_engine,omitempty"` // engine doing the integrity, if any
}

// Rank orders proposals so that those whose encryption an engine does come
// first, and among equals those whose integrity an engine also does; the
// configured order is kept otherwise. Without usable engines the order is
// unchanged.
func (r *Report) Rank(proposals []string) []Ranked {
	out := make([]Ranked, len(proposals))
	for i, p := range proposals {
		ok, engine := r.Accelerated(p)
		out[i] = Ranked{Proposal: p, Accelerated: ok, Engine: engine}
		_, integs := parseProposal(p)
		if len(integs) > 0 {
			out[i].HashEngine = r.hashEngine(integs[0])
			for _, h := range integs[1:] {
				if r.hashEngine(h) == "" {
					out[i].HashEngine = ""
				}
			}
		}
	}
	score := func(x Ranked) int {
		s := 0
		if x.Accelerated {
			s += 2
		}
		if x.HashEngine != "" {
			s++
		}
		return s
	}
	sort.SliceStable(out, func(i, j int) bool { return score(out[i]) > score(out[j]) })
	return out
}

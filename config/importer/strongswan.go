package importer

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/flashgate/flashgate/config"
)

// What swanctl.conf and ipsec.conf share: strongSwan's (and, with a few
// spellings more, libreswan's) proposal syntax, durations and subnets.

// proposalList reads a comma-separated list of proposals in strongSwan or
// libreswan syntax into config's form, checking each under the tunnel's
// IKE version with legacy algorithms allowed (finish turns legacy on when
// one is used). It returns what it could not read, with the reasons.
func proposalList(v string, ike bool, version config.IKEVersion) (props []string, problems []string) {
	rules := config.ProposalRules{IKEVersion: version, Legacy: true}
	for _, p := range splitList(v) {
		if p == "default" {
			problems = append(problems, "default: strongSwan's default proposals are not imported; flashgate's defaults are used unless others are listed")
			continue
		}
		norm := normalizeProposal(p)
		check := rules.CheckESP
		if ike {
			check = rules.CheckIKE
		}
		if err := check(norm); err != nil {
			_, why, _ := strings.Cut(err.Error(), ": ")
			problems = append(problems, p+": "+why)
			continue
		}
		props = appendUnique(props, norm)
	}
	return props, problems
}

// libreswanTokens maps libreswan's and strongSwan's other spellings to the
// names config knows.
var libreswanTokens = map[string]string{
	"aes": "aes128", "aes_cbc": "aes128", "aes_cbc128": "aes128", "aes_cbc_128": "aes128", "aes_cbc192": "aes192",
	"aes_cbc256": "aes256", "aes_cbc_256": "aes256", "aes_gcm": "aes128gcm16", "aes_gcm16": "aes128gcm16",
	"aes_gcm128": "aes128gcm16", "aes_gcm256": "aes256gcm16", "aes_gcm_256": "aes256gcm16",
	"aes_gcm16_128": "aes128gcm16", "aes_gcm16_256": "aes256gcm16",
	"sha": "sha1", "sha2": "sha256", "sha2_256": "sha256", "sha2_384": "sha384", "sha2_512": "sha512",
	"sha256_128": "sha256", "sha1_96": "sha1", "md5_96": "md5",
	"dh2": "modp1024", "dh5": "modp1536", "dh14": "modp2048", "dh15": "modp3072", "dh16": "modp4096",
	"dh19": "ecp256", "dh20": "ecp384", "dh21": "ecp521", "dh31": "curve25519",
	"modp768": "modp768", "dh1": "modp768", "3des_cbc": "3des", "des_cbc": "des",
}

// normalizeProposal turns "aes128-sha1;modp1024!" or "AES_CBC-SHA2_256"
// into "aes128-sha1-modp1024" / "aes128-sha256".
func normalizeProposal(p string) string {
	p = strings.ToLower(strings.TrimSpace(p))
	p = strings.TrimSuffix(p, "!")
	p = strings.ReplaceAll(p, ";", "-")
	var out []string
	for _, tok := range strings.Split(p, "-") {
		if m, ok := libreswanTokens[tok]; ok {
			tok = m
		}
		out = append(out, tok)
	}
	return strings.Join(out, "-")
}

// parseDuration reads strongSwan's and libreswan's durations: a number
// with an optional s, m, h or d (seconds without).
func parseDuration(v string) (config.Duration, bool) {
	v = strings.TrimSpace(strings.ToLower(v))
	if v == "" {
		return config.Duration{}, false
	}
	unit := time.Second
	switch v[len(v)-1] {
	case 's':
		v = v[:len(v)-1]
	case 'm':
		unit, v = time.Minute, v[:len(v)-1]
	case 'h':
		unit, v = time.Hour, v[:len(v)-1]
	case 'd':
		unit, v = 24*time.Hour, v[:len(v)-1]
	}
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || fmt.Sprint(n) != v || n < 0 || n > 10*365*24*3600 {
		return config.Duration{}, false
	}
	return config.Duration{Duration: time.Duration(n) * unit}, true
}

// subnetList reads "10.0.0.0/24, 10.1.0.0/16" (also a plain address, a
// /32 then); strongSwan's [proto/port] selectors are refused.
func subnetList(v string) ([]config.Prefix, []string) {
	var out []config.Prefix
	var problems []string
	for _, s := range splitList(v) {
		if strings.Contains(s, "[") {
			problems = append(problems, s+": protocol and port selectors are not supported; flashgate tunnels carry all traffic between the subnets")
			continue
		}
		if strings.HasPrefix(s, "%") || s == "dynamic" {
			problems = append(problems, s+": flashgate needs the subnet written out")
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				problems = append(problems, s+": not a subnet")
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Masked() != p {
			problems = append(problems, fmt.Sprintf("%s has host bits set; imported as %s", s, p.Masked()))
		}
		out = appendPrefix(out, p.Masked())
	}
	return out, problems
}

// address reads one peer or local address; %any and the like are none.
func address(v string) (netip.Addr, string) {
	list := splitList(v)
	if len(list) == 0 {
		return netip.Addr{}, ""
	}
	first := list[0]
	why := ""
	if len(list) > 1 {
		why = fmt.Sprintf("flashgate tunnels have one address per side; %s is imported", first)
	}
	switch strings.ToLower(first) {
	case "%any", "%any4", "%any6", "0.0.0.0", "::", "%defaultroute", "%opportunistic":
		return netip.Addr{}, why
	}
	a, err := netip.ParseAddr(first)
	if err != nil {
		return netip.Addr{}, first + ": flashgate tunnels take IP addresses, not host names or ranges"
	}
	return a, why
}

// unquote removes the double quotes around a value.
func unquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// pskValue reads a PSK as strongSwan writes it; 0x (hex) and 0s (base64)
// keys are binary, which flashgate's text PSKs cannot hold.
func pskValue(v string) (string, string) {
	v = unquote(strings.TrimSpace(v))
	if strings.HasPrefix(v, "0x") || strings.HasPrefix(v, "0s") {
		return "", "a binary key (0x or 0s): flashgate's pre-shared keys are text; set a new one on both sides"
	}
	return v, ""
}

func prefixOf(a config.Addr) netip.Prefix { return netip.PrefixFrom(a.Addr, a.BitLen()) }

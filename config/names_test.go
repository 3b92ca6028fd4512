package config

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// nameSamples are every string of up to 4 bytes over an alphabet that has
// each kind of byte the rules tell apart, and random strings of valid
// bytes with one odd byte now and then, of every length around the limits.
func nameSamples() []string {
	const alphabet = "aZ5_-. \xc3"
	out := []string{""}
	level := []string{""}
	for n := 1; n <= 4; n++ {
		var next []string
		for _, p := range level {
			for i := 0; i < len(alphabet); i++ {
				next = append(next, p+alphabet[i:i+1])
			}
		}
		out = append(out, next...)
		level = next
	}
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int, valid string, odd int) string {
		var b strings.Builder
		for range n {
			if rng.IntN(odd) == 0 {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			} else {
				b.WriteByte(valid[rng.IntN(len(valid))])
			}
		}
		return b.String()
	}
	for n := 1; n <= 70; n++ {
		for range 20 {
			out = append(out,
				"a"+random(n-1, "abcXYZ0189_-", 1000)+"b", // a name's bytes
				"a"+random(n-1, "abcXYZ0189-", 1000)+"b",  // a host label's
				random(n, "abcXYZ0189_-", 20))             // now and then another
		}
	}
	return out
}

// TestNameRulesAsRegexps holds each nameRule to the regular expression it
// replaced.
func TestNameRulesAsRegexps(t *testing.T) {
	for _, c := range []struct {
		name string
		rule nameRule
		re   string
	}{
		{"nameRE", nameRE, `^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`},
		{"ifnameRE", ifnameRE, `^[A-Za-z][A-Za-z0-9_-]{0,14}$`},
		{"hostLabel", hostLabel, `^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`},
	} {
		re := regexp.MustCompile(c.re)
		matched := 0
		for _, s := range nameSamples() {
			want := re.MatchString(s)
			if got := c.rule.MatchString(s); got != want {
				t.Errorf("%s(%q) = %v, the expression %s says %v", c.name, s, got, c.re, want)
			}
			if want {
				matched++
			}
		}
		if matched < 100 {
			t.Errorf("%s: only %d samples match: the samples do not test it", c.name, matched)
		}
	}
	if maxNameLen(nameRE) != 32 || maxNameLen(ifnameRE) != 15 {
		t.Errorf("maxNameLen: %d and %d, want 32 and 15", maxNameLen(nameRE), maxNameLen(ifnameRE))
	}
}

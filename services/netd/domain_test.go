package netd

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestValidDomainAsRegexp holds validDomain to the regular expression it
// replaced, over every string of up to 4 bytes of an alphabet with each
// kind of byte it tells apart, and random names of valid bytes with an odd
// byte now and then, of every length around the label and name limits.
func TestValidDomainAsRegexp(t *testing.T) {
	re := regexp.MustCompile(`^([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.?$`)
	const alphabet = "aZ5_-. \n\xc3"
	samples := []string{""}
	level := []string{""}
	for n := 1; n <= 4; n++ {
		var next []string
		for _, p := range level {
			for i := 0; i < len(alphabet); i++ {
				next = append(next, p+alphabet[i:i+1])
			}
		}
		samples = append(samples, next...)
		level = next
	}
	rng := rand.New(rand.NewPCG(3, 4))
	label := func(n int) string {
		const valid = "abcXYZ0189_-"
		var b strings.Builder
		for range n {
			if rng.IntN(30) == 0 {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			} else {
				b.WriteByte(valid[rng.IntN(len(valid))])
			}
		}
		return b.String()
	}
	for n := 1; n <= 66; n++ {
		for range 30 {
			samples = append(samples, label(n), label(n)+".", label(rng.IntN(5)+1)+"."+label(n))
		}
	}
	// Long names of short labels, around the 253-byte limit.
	for n := 240; n <= 260; n++ {
		s := strings.Repeat("ab.", n/3+1)[:n]
		samples = append(samples, s, strings.TrimSuffix(s, ".")+"x")
	}
	matched := 0
	for _, s := range samples {
		want := len(s) <= 253 && re.MatchString(s)
		if got := validDomain(s); got != want {
			t.Errorf("validDomain(%q) = %v, the expression says %v", s, got, want)
		}
		if want {
			matched++
		}
	}
	if matched < 500 {
		t.Errorf("only %d samples are valid names: the samples do not test it", matched)
	}
}

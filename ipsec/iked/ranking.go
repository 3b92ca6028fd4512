package iked

import (
	"github.com/flashgate/flashgate/ipsec/hwcrypto"
	"github.com/flashgate/flashgate/ipsec/ike"
)

// RankingFrom makes the engine's proposal ranking hook from the crypto
// engines found on the board: proposals the engine accelerates are offered
// first (on a Geode: AES-128-CBC), the configured order is kept otherwise.
// With a nil report the order is left alone.
func RankingFrom(r *hwcrypto.Report) ike.Ranking {
	if r == nil {
		return nil
	}
	return func(ps []ike.Proposal) []ike.Proposal {
		names := make([]string, len(ps))
		byName := make(map[string][]ike.Proposal, len(ps))
		for i, p := range ps {
			names[i] = p.String()
			byName[names[i]] = append(byName[names[i]], p)
		}
		out := make([]ike.Proposal, 0, len(ps))
		for _, rk := range r.Rank(names) {
			q := byName[rk.Proposal]
			out = append(out, q[0])
			byName[rk.Proposal] = q[1:]
		}
		return out
	}
}

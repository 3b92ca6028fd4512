package ike

import (
	"crypto/sha256"
	"net/netip"
	"time"
)

// endedKeep is how long our answer to the request that ended an IKE SA
// (the peer's DELETE) is kept for retransmissions of that request. A peer
// whose copy of the answer is lost retransmits the request, and keeps the
// SA meanwhile, until it gives up: strongSwan by default after 5
// retransmissions from 4 s, each 1.8 times longer than the one before,
// about 165 s. Without the answer the SA outlives the tunnel at the peer
// for that long, and a peer that counts its SAs sees one too many.
const endedKeep = 3 * time.Minute

// maxEnded bounds the answers kept. Only authenticated requests add one.
const maxEnded = 1024

// endedSA is what is left of an IKE SA that a request of the peer ended:
// the SHA-256 of that request as it came (a retransmission is bitwise
// identical, RFC 7296 2.1), and our answer to it, sealed with keys that
// are gone. The hash, not the request: a request may be padded to 64 KB,
// and a thousand of them were kept for three minutes.
type endedSA struct {
	request [32]byte
	answer  []byte
	until   time.Time
}

// rememberEnd keeps the answer to request, which ended the IKE SA whose
// SPI on our side is spi.
func (ep *Endpoint) rememberEnd(spi uint64, request, answer []byte) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if len(ep.ended) >= maxEnded {
		return
	}
	ep.ended[spi] = endedSA{request: sha256.Sum256(request), answer: answer, until: ep.now().Add(endedKeep)}
}

// answerEnded answers pkt from the cache if it is a retransmission of the
// request that ended the IKE SA with our SPI spi, and reports whether it
// was.
func (ep *Endpoint) answerEnded(spi uint64, pkt []byte, local, remote netip.AddrPort) bool {
	ep.mu.Lock()
	e, ok := ep.ended[spi]
	ep.mu.Unlock()
	if !ok || sha256.Sum256(pkt) != e.request || !ep.now().Before(e.until) {
		return false
	}
	ep.Stats.RetransmitsAnswered.Add(1)
	ep.sendRaw(e.answer, local, remote)
	return true
}

// expireEnded forgets the answers whose time is up.
func (ep *Endpoint) expireEnded(now time.Time) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	for spi, e := range ep.ended {
		if !now.Before(e.until) {
			delete(ep.ended, spi)
		}
	}
}

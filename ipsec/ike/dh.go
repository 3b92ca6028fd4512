package ike

import (
	"crypto/ecdh"
	"crypto/subtle"
	"fmt"
	"io"
	"math/big"
)

// DHGroup is a Diffie-Hellman group number (IANA transform type 4).
type DHGroup uint16

const (
	MODP1024   DHGroup = 2 // legacy (RFC 2409 group 2)
	MODP1536   DHGroup = 5 // legacy (RFC 3526 group 5)
	MODP2048   DHGroup = 14
	MODP3072   DHGroup = 15
	MODP4096   DHGroup = 16
	ECP256     DHGroup = 19
	ECP384     DHGroup = 20
	ECP521     DHGroup = 21
	Curve25519 DHGroup = 31
)

func (g DHGroup) String() string {
	for _, k := range dhKeywords {
		if k.g == g {
			return k.word
		}
	}
	if g == 0 {
		return "none"
	}
	if w, ok := dhWords[g]; ok {
		return w // a group we do not run, named for messages (proposal.go)
	}
	return fmt.Sprintf("dh%d", uint16(g))
}

// RFC 3526 MODP primes; the generator is 2 for all of them.
var (
	modp1024 = mustHex(
		"FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74" +
			"020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437" +
			"4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED" +
			"EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF")
	modp1536 = mustHex(
		"FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74" +
			"020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437" +
			"4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED" +
			"EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF05" +
			"98DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB" +
			"9ED529077096966D670C354E4ABC9804F1746C08CA237327FFFFFFFFFFFFFFFF")
	modp2048 = mustHex(
		"FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74" +
			"020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437" +
			"4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED" +
			"EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF05" +
			"98DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB" +
			"9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B" +
			"E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF695581718" +
			"3995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF")
	modp3072 = mustHex(
		"FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74" +
			"020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437" +
			"4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED" +
			"EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF05" +
			"98DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB" +
			"9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B" +
			"E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF695581718" +
			"3995497CEA956AE515D2261898FA051015728E5A8AAAC42DAD33170D04507A33" +
			"A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7" +
			"ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864" +
			"D87602733EC86A64521F2B18177B200CBBE117577A615D6C770988C0BAD946E2" +
			"08E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF")
	modp4096 = mustHex(
		"FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74" +
			"020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437" +
			"4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED" +
			"EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF05" +
			"98DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB" +
			"9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B" +
			"E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF695581718" +
			"3995497CEA956AE515D2261898FA051015728E5A8AAAC42DAD33170D04507A33" +
			"A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7" +
			"ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864" +
			"D87602733EC86A64521F2B18177B200CBBE117577A615D6C770988C0BAD946E2" +
			"08E24FA074E5AB3143DB5BFCE0FD108E4B82D120A92108011A723C12A787E6D7" +
			"88719A10BDBA5B2699C327186AF4E23C1A946834B6150BDA2583E9CA2AD44CE8" +
			"DBBBC2DB04DE8EF92E8EFC141FBECAA6287C59474E6BC05D99B2964FA090C3A2" +
			"233BA186515BE7ED1F612970CEE2D7AFB81BDD762170481CD0069127D5B05AA9" +
			"93B4EA988D8FDDC186FFB7DC90A6C08F4DF435C934063199FFFFFFFFFFFFFFFF")
)

func mustHex(s string) *big.Int {
	n, ok := new(big.Int).SetString(s, 16)
	if !ok {
		panic("bad prime constant")
	}
	return n
}

// dhKey is one side's ephemeral key for one exchange.
type dhKey interface {
	// Public is the KE payload data.
	Public() []byte
	// Shared computes g^ir from the peer's KE data, validating it.
	Shared(peer []byte) ([]byte, error)
	// Zero forgets the private part.
	Zero()
}

// supported reports whether the group is implemented.
func (g DHGroup) supported() bool {
	switch g {
	case MODP1024, MODP1536, MODP2048, MODP3072, MODP4096, ECP256, ECP384, ECP521, Curve25519:
		return true
	}
	return false
}

func (g DHGroup) modp() *big.Int {
	switch g {
	case MODP1024:
		return modp1024
	case MODP1536:
		return modp1536
	case MODP2048:
		return modp2048
	case MODP3072:
		return modp3072
	case MODP4096:
		return modp4096
	}
	return nil
}

func (g DHGroup) curve() ecdh.Curve {
	switch g {
	case ECP256:
		return ecdh.P256()
	case ECP384:
		return ecdh.P384()
	case ECP521:
		return ecdh.P521()
	case Curve25519:
		return ecdh.X25519()
	}
	return nil
}

// newDHKey makes an ephemeral key in group g.
func newDHKey(g DHGroup, rand io.Reader) (dhKey, error) {
	if p := g.modp(); p != nil {
		// A 512-bit exponent exceeds twice the strength of every MODP group
		// offered here (RFC 3526 section 8), at a fraction of full-size cost.
		x := make([]byte, 64)
		if _, err := io.ReadFull(rand, x); err != nil {
			return nil, fmt.Errorf("DH %v private key: %w", g, err)
		}
		k := &modpKey{p: p, x: new(big.Int).SetBytes(x)}
		clear(x)
		k.pub = new(big.Int).Exp(big.NewInt(2), k.x, p).FillBytes(make([]byte, (p.BitLen()+7)/8))
		return k, nil
	}
	c := g.curve()
	if c == nil {
		return nil, fmt.Errorf("DH group %v not supported", g)
	}
	priv, err := c.GenerateKey(rand)
	if err != nil {
		return nil, fmt.Errorf("DH %v private key: %w", g, err)
	}
	return &ecKey{group: g, priv: priv}, nil
}

type modpKey struct {
	p, x *big.Int
	pub  []byte
}

func (k *modpKey) Public() []byte { return k.pub }

func (k *modpKey) Shared(peer []byte) ([]byte, error) {
	size := (k.p.BitLen() + 7) / 8
	if len(peer) != size {
		return nil, fmt.Errorf("MODP public value of %d bytes, want %d", len(peer), size)
	}
	y := new(big.Int).SetBytes(peer)
	// Reject 0, 1 and p-1 and anything not below p (small-subgroup values).
	pm1 := new(big.Int).Sub(k.p, big.NewInt(1))
	if y.Cmp(big.NewInt(1)) <= 0 || y.Cmp(pm1) >= 0 {
		return nil, fmt.Errorf("MODP public value out of range")
	}
	return new(big.Int).Exp(y, k.x, k.p).FillBytes(make([]byte, size)), nil
}

func (k *modpKey) Zero() {
	clear(k.x.Bits())
	k.x.SetInt64(0)
}

type ecKey struct {
	group DHGroup
	priv  *ecdh.PrivateKey
}

// Public returns x||y for the NIST curves (RFC 5903 section 7: no 0x04
// point-format octet) and the raw u-coordinate for Curve25519 (RFC 8031).
func (k *ecKey) Public() []byte {
	b := k.priv.PublicKey().Bytes()
	if k.group != Curve25519 {
		return b[1:]
	}
	return b
}

func (k *ecKey) Shared(peer []byte) ([]byte, error) {
	b := peer
	if k.group != Curve25519 {
		b = append([]byte{4}, peer...)
	}
	pub, err := k.group.curve().NewPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("DH %v public value: %w", k.group, err)
	}
	s, err := k.priv.ECDH(pub)
	if err != nil {
		return nil, fmt.Errorf("DH %v: %w", k.group, err)
	}
	// RFC 8031 section 2.1: an all-zero X25519 result must be refused.
	if subtle.ConstantTimeCompare(s, make([]byte, len(s))) == 1 {
		return nil, fmt.Errorf("DH %v: all-zero shared secret", k.group)
	}
	return s, nil
}

// Zero drops the key; crypto/ecdh offers no way to overwrite it.
func (k *ecKey) Zero() { k.priv = nil }

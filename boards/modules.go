package boards

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// commonModules are needed on every board, whatever its hardware. They are
// the Debian 6.1 module file names (without .ko), in load order. Things the
// Debian kernels build in are left out: af_packet, ipv6, aes_generic, cbc,
// hmac, sha1_generic, sha256_generic, cryptomgr, nft_counter (part of
// nf_tables). The boot has no udev and the kernel's request_module finds no
// modprobe, so a module is only there if it is listed here or is a symbol
// dependency of a listed one (the image builder adds those with depmod).
var commonModules = []string{
	// The config partition is ext2, which Debian serves with ext4
	// (CONFIG_EXT4_USE_FOR_EXT2). ext4 pulls crc32c through a softdep,
	// which u-root's modprobe ignores: load it first ourselves.
	"crc32c_generic", "ext4",
	// The boot partition is FAT16. The kernel's defaults are codepage 437
	// and iocharset "ascii" (CONFIG_FAT_DEFAULT_*), and vfat refuses to
	// mount when the iocharset's module is missing.
	"vfat", "nls_cp437", "nls_ascii",
	// The userspace ESP data plane runs over TUN.
	"tun",
	// Kernel IPsec: SAs and policies over netlink (xfrm_user), ESP for
	// IPv4 and IPv6 (ESP-in-UDP for NAT-T is part of esp4/esp6), and XFRM
	// interfaces for route-based tunnels. Tunnel mode is built into the
	// xfrm core since 5.2, so no xfrm4_tunnel (that is IP-in-IP, for
	// IPComp only).
	"xfrm_user", "esp4", "esp6", "xfrm_interface",
	// The algorithms ESP asks the crypto API for: authenc(hmac(..),cbc(..))
	// with echainiv IVs; rfc4106(gcm(aes)) = ctr + ghash with seqiv IVs;
	// rfc7539esp(chacha20,poly1305); SHA-384/512 for HMAC-SHA2-384/512.
	// A board's engine module (geode-aes, padlock-aes, aesni-intel) only
	// replaces the AES part, at a higher priority.
	// echainiv and seqiv need the default RNG (drbg, seeded by
	// jitterentropy_rng): without them every SA add fails with ENOENT, as
	// nothing would load them on demand (seen in the VM).
	// drbg's self-tests run its CTR(AES) and HMAC-SHA512 variants, so ctr
	// and sha512_generic come first (else WARN traces at boot).
	"ctr", "sha512_generic", "jitterentropy_rng", "drbg",
	"authenc", "echainiv", "seqiv", "ghash-generic", "gcm",
	"chacha_generic", "poly1305_generic", "chacha20poly1305",
	// AF_ALG, so userspace can benchmark and pin an engine by driver name.
	"af_alg", "algif_skcipher", "algif_aead", "algif_hash",
	// The nftables firewall: filter, conntrack, NAT and masquerade,
	// reject, rate limits and logging, IPsec policy matching (nft_xfrm),
	// and flowtables, the software fast path that matters most on a
	// 500 MHz Geode.
	"nf_tables", "nf_conntrack", "nf_nat", "nft_ct", "nft_chain_nat", "nft_nat",
	"nft_masq", "nft_reject_inet", "nft_limit", "nft_log", "nf_log_syslog",
	"nft_xfrm", "nf_flow_table_inet", "nft_flow_offload",
}

// common returns a fresh copy of commonModules, so that no board shares a
// backing array with another.
func common() []string { return slices.Clone(commonModules) }

// kernelModules is what a kernel's module directory holds.
type kernelModules struct {
	files   map[string]bool // module file names without .ko (and without .xz/.zst/.gz)
	builtin map[string]bool // names in modules.builtin
}

// readKernelModules walks dir (a /lib/modules/<version> tree) for module
// files and reads its modules.builtin, if any.
func readKernelModules(dir string) (kernelModules, error) {
	km := kernelModules{files: map[string]bool{}, builtin: map[string]bool{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if name, ok := moduleName(d.Name()); ok {
			km.files[name] = true
		}
		return nil
	})
	if err != nil {
		return km, fmt.Errorf("read kernel modules in %s: %w", dir, err)
	}
	if len(km.files) == 0 {
		return km, fmt.Errorf("read kernel modules in %s: no .ko files", dir)
	}
	f, err := os.Open(filepath.Join(dir, "modules.builtin"))
	if errors.Is(err, fs.ErrNotExist) {
		return km, nil
	}
	if err != nil {
		return km, fmt.Errorf("read kernel modules in %s: %w", dir, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, ok := moduleName(filepath.Base(strings.TrimSpace(sc.Text()))); ok {
			km.builtin[name] = true
		}
	}
	if err := sc.Err(); err != nil {
		return km, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return km, nil
}

// moduleName returns the module name of a module file name: "via-rhine.ko"
// and "via-rhine.ko.xz" are both "via-rhine".
func moduleName(file string) (string, bool) {
	for _, suffix := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
		if name, ok := strings.CutSuffix(file, suffix); ok && name != "" {
			return name, true
		}
	}
	return "", false
}

// canonical is the name the kernel compares modules by: it treats '-' and
// '_' alike.
func canonical(name string) string { return strings.ReplaceAll(name, "-", "_") }

// check returns one error per module of b that the kernel does not have as
// a loadable file.
func (km kernelModules) check(b Board) []error {
	byCanonical := map[string]string{}
	for f := range km.files {
		byCanonical[canonical(f)] = f
	}
	var errs []error
	for _, m := range b.AllModules() {
		switch {
		case km.files[m]:
		case km.builtin[m]:
			errs = append(errs, fmt.Errorf("board %s: module %s is built into this kernel (modules.builtin): drop it from the definition", b.Name, m))
		case byCanonical[canonical(m)] != "":
			errs = append(errs, fmt.Errorf("board %s: no module file %s.ko; the file is %s.ko", b.Name, m, byCanonical[canonical(m)]))
		default:
			errs = append(errs, fmt.Errorf("board %s: module %s is not in this kernel", b.Name, m))
		}
	}
	return errs
}

// CheckModules checks that every module b needs is a module file in
// modulesDir, a /lib/modules/<version> tree of the kernel the image is
// built with. The image builder calls it before computing the module
// closure, so that a renamed or dropped module fails the build by name
// instead of leaving a board without its disk or network.
func (b Board) CheckModules(modulesDir string) error {
	km, err := readKernelModules(modulesDir)
	if err != nil {
		return err
	}
	return errors.Join(km.check(b)...)
}

// CheckModules checks every supported board built with the kernel in
// modulesDir. The kernel flavour is taken from the directory name, which
// for Debian kernels ends in it (6.1.0-50-686, 6.1.0-50-amd64); an error
// says so when it names no flavour a board uses.
func CheckModules(modulesDir string) error {
	version := filepath.Base(filepath.Clean(modulesDir))
	var boards []Board
	var flavours []string
	for _, b := range All() {
		if b.Unsupported != "" {
			continue
		}
		if !slices.Contains(flavours, b.KernelFlavour) {
			flavours = append(flavours, b.KernelFlavour)
		}
		if strings.HasSuffix(version, "-"+b.KernelFlavour) {
			boards = append(boards, b)
		}
	}
	if len(boards) == 0 {
		return fmt.Errorf("check modules in %s: version %q ends in none of the kernel flavours boards use (%s)",
			modulesDir, version, strings.Join(flavours, ", "))
	}
	km, err := readKernelModules(modulesDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range boards {
		errs = append(errs, km.check(b)...)
	}
	return errors.Join(errs...)
}

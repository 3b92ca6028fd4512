package images

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/upgrade/imagefile"
)

// Builder builds card images.
type Builder struct {
	RepoRoot string // root of the flashgate module (go.mod, firmware/)
	OutDir   string // images are written here
	CacheDir string // u-root and tools; default OutDir/cache
	// KernelCacheDir holds the kernel source and built kernels, shared by
	// every checkout; DefaultKernelCache when empty.
	KernelCacheDir string
	AptOpts        []string  // extra apt "-o" settings (tests point apt at a dead proxy)
	Epoch          time.Time // every timestamp in the image; see SourceDateEpoch
	Log            io.Writer // progress, or nil
	// SigningKey signs the slot's manifest and the upgrade file, and its
	// public key goes on the card as the one the box trusts. Without one
	// the image is a developer's: unsigned, and its card accepts unsigned
	// upgrades (the dashboard says so).
	SigningKey ed25519.PrivateKey
}

// UpgradePath is where Build writes the upgrade file of board at version.
func (b *Builder) UpgradePath(board, version string) string {
	return filepath.Join(b.OutDir, fmt.Sprintf("flashgate-%s-%s.fgup", board, version))
}

// ImagePath is where Build writes the image of board at version.
func (b *Builder) ImagePath(board, version string) string {
	return filepath.Join(b.OutDir, fmt.Sprintf("flashgate-%s-%s.img", board, version))
}

var versionPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`)

// slotOverhead is what the boot partition holds besides the firmware:
// ldlinux.sys, ldlinux.c32, syslinux.cfg and FAT metadata, rounded up.
const slotOverhead = 256 * 1024

// ErrDoesNotFit is returned (wrapped, with the numbers) when a board's
// firmware does not fit its smallest supported card.
var ErrDoesNotFit = errors.New("firmware does not fit the card")

// Build builds the card image for board and returns what went into it. On
// error no image file is left behind.
func (b *Builder) Build(ctx context.Context, board boards.Board, version string) (*Report, error) {
	if board.Unsupported != "" {
		return nil, fmt.Errorf("board %s is not supported: %s", board.Name, board.Unsupported)
	}
	if !versionPattern.MatchString(version) {
		return nil, fmt.Errorf("version %q: use letters, digits and . _ + - only (it goes into a file name and the kernel command line)", version)
	}
	if err := CheckBuildTools(); err != nil {
		return nil, err
	}
	layout, err := PlanLayout(board.MinCardMB)
	if err != nil {
		return nil, fmt.Errorf("board %s: %w", board.Name, err)
	}
	// Checked before the long part of the build: the board's console.
	if _, err := SyslinuxConfig(board); err != nil {
		return nil, fmt.Errorf("board %s: %w", board.Name, err)
	}
	epoch := b.Epoch
	if epoch.IsZero() {
		epoch = SourceDateEpoch(b.RepoRoot)
	}
	outDir, err := filepath.Abs(b.OutDir)
	if err != nil {
		return nil, err
	}
	cache := b.CacheDir
	if cache == "" {
		cache = filepath.Join(outDir, "cache")
	}
	// modprobe prints absolute paths, and u-root runs in another directory.
	if cache, err = filepath.Abs(cache); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}

	kb := &KernelBuild{CacheDir: b.KernelCacheDir, AptOpts: b.AptOpts, Log: b.Log}
	kernelStart := time.Now()
	kern, err := kb.Build(ctx, board)
	if err != nil {
		return nil, err
	}
	kernelStep := time.Since(kernelStart)
	closure := &ModuleClosure{}
	if len(board.Modules) > 0 {
		if !kern.Modules {
			return nil, fmt.Errorf("board %s lists modules %v, but its kernel config builds none (=m)", board.Name, board.Modules)
		}
		if closure, err = kern.Closure(ctx, board.Modules); err != nil {
			return nil, fmt.Errorf("board %s: %w", board.Name, err)
		}
	}

	work, err := os.MkdirTemp(outDir, ".build-"+board.Name+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	var modRoot string
	var modBytes int64
	if len(closure.Modules) > 0 {
		modRoot = filepath.Join(work, "modroot")
		if modBytes, err = kern.Stage(ctx, closure, modRoot); err != nil {
			return nil, err
		}
	}
	initrd := filepath.Join(work, "initrd.img")
	ir := &Initramfs{RepoRoot: b.RepoRoot, CacheDir: cache, GOARCH: board.GOARCH, GO386: board.GO386,
		ModulesDir: modRoot, Log: b.logf}
	_, cpioBytes, err := ir.Build(ctx, initrd)
	if err != nil {
		return nil, err
	}
	if err := AppendToInitramfs(initrd, map[string][]byte{VersionFile: []byte(version + "\n")}, nil); err != nil {
		return nil, fmt.Errorf("stamp the version into the initramfs: %w", err)
	}
	ifi, err := os.Stat(initrd)
	if err != nil {
		return nil, err
	}
	initrdBytes := ifi.Size()
	kfi, err := os.Stat(kern.Vmlinuz)
	if err != nil {
		return nil, err
	}
	rep := &Report{
		Board: board.Name, Version: version, Image: b.ImagePath(board.Name, version),
		Kernel: fmt.Sprintf("%s from %s", kern.Release, kern.Package), KernelBuilt: kern.Built, KernelBuildTime: kern.BuildTime, KernelStepTime: kernelStep,
		KernelBytes: kfi.Size(), Modules: closure.Modules, ModulesBytes: modBytes, InitBytes: ir.InitBytes,
		CPIOBytes: cpioBytes, InitramfsBytes: initrdBytes,
		BootBytes: layout.BootBytes, ConfigBytes: layout.ConfigBytes, CardBytes: layout.CardBytes,
		MinCardMB: board.MinCardMB,
	}
	if err := checkFit(rep); err != nil {
		return nil, err
	}

	b.logf("laying out the card (%d MiB)", layout.CardBytes/mib)
	spec := CardSpec{Board: board, Version: version, Epoch: epoch, Kernel: kern.Vmlinuz, Initrd: initrd,
		Key: b.SigningKey, Image: rep.Image, UpgradeFile: b.UpgradePath(board.Name, version), Work: work}
	if rep.Slot, rep.BootFreeBytes, err = MakeCard(ctx, spec); err != nil {
		return nil, err
	}
	rep.UpgradeFile = spec.UpgradeFile
	rep.Signer = "unsigned (a developer's image; its card accepts unsigned upgrades)"
	if b.SigningKey != nil {
		rep.Signer = imagefile.Fingerprint(b.SigningKey.Public().(ed25519.PublicKey))
	}
	return rep, nil
}

// CardSpec is a card to lay out around a built kernel and initramfs.
type CardSpec struct {
	Board          boards.Board
	Version        string
	Epoch          time.Time // every timestamp; its Unix time is the manifest's build time
	Kernel, Initrd string    // the slot's files (the initramfs already stamped with its version)
	Key            ed25519.PrivateKey
	Image          string // the card image to write
	UpgradeFile    string // the .fgup to write alongside
	Work           string // scratch directory
}

// MakeCard lays out s's card (partitions, syslinux, both slots, the key)
// and writes its upgrade file. It returns the slot plan and the free bytes
// left on the boot partition.
func MakeCard(ctx context.Context, s CardSpec) (SlotPlan, int64, error) {
	layout, err := PlanLayout(s.Board.MinCardMB)
	if err != nil {
		return SlotPlan{}, 0, fmt.Errorf("board %s: %w", s.Board.Name, err)
	}
	cfg, err := SyslinuxConfig(s.Board)
	if err != nil {
		return SlotPlan{}, 0, fmt.Errorf("board %s: %w", s.Board.Name, err)
	}
	var sizes [2]int64
	for i, p := range []string{s.Kernel, s.Initrd} {
		fi, err := os.Stat(p)
		if err != nil {
			return SlotPlan{}, 0, err
		}
		sizes[i] = fi.Size()
	}
	plan, err := planSlots(layout.BootBytes, sizes[0], sizes[1])
	if err != nil {
		return SlotPlan{}, 0, fmt.Errorf("board %s: %w", s.Board.Name, err)
	}
	slot := imagefile.Slot{Version: s.Version, Board: s.Board.Name, Built: s.Epoch.Unix(), Kernel: s.Kernel, Initrd: s.Initrd,
		// The firmware is built from this tree: its config package is this one.
		Extension: &imagefile.Extension{ConfigDBFormats: config.DBFormats, ConfigSchema: config.SchemaVersion}}
	upgradeTmp := filepath.Join(s.Work, "upgrade.fgup")
	header, err := WriteUpgradeFile(upgradeTmp, slot, s.Key)
	if err != nil {
		return SlotPlan{}, 0, err
	}
	files, err := stageBootFiles(s.Work, cfg, plan, slot, header, s.Key)
	if err != nil {
		return SlotPlan{}, 0, err
	}
	card := &cardBuild{Image: filepath.Join(s.Work, "card.img"), Layout: layout,
		IDs: deriveCardIDs(s.Board.Name, s.Version), Epoch: s.Epoch, Work: s.Work}
	if err := card.create(ctx, files); err != nil {
		return SlotPlan{}, 0, err
	}
	free, err := card.bootFreeBytes(ctx)
	if err != nil {
		return SlotPlan{}, 0, err
	}
	if err := os.Rename(card.Image, s.Image); err != nil {
		return SlotPlan{}, 0, fmt.Errorf("move the image into place: %w", err)
	}
	if err := os.Rename(upgradeTmp, s.UpgradeFile); err != nil {
		return SlotPlan{}, 0, fmt.Errorf("move the upgrade file into place: %w", err)
	}
	return plan, free, nil
}

// stageBootFiles writes the boot partition's files into work: syslinux.cfg
// and its menu modules, the trusted key file, slot A (kernel and initramfs
// padded to the plan, and the upgrade header as its manifest) and slot B at
// the same sizes, all zeros.
func stageBootFiles(work, cfg string, plan SlotPlan, slot imagefile.Slot, header []byte, key ed25519.PrivateKey) ([]bootFile, error) {
	dir := filepath.Join(work, "slots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	stage := func(name string, write func(string) error) (string, error) {
		p := filepath.Join(dir, name)
		return p, write(p)
	}
	var files []bootFile
	add := func(dst, name string, write func(string) error) error {
		p, err := stage(name, write)
		if err != nil {
			return fmt.Errorf("stage %s: %w", dst, err)
		}
		files = append(files, bootFile{Src: p, Dst: dst})
		return nil
	}
	if err := add("/syslinux.cfg", "syslinux.cfg", func(p string) error { return os.WriteFile(p, []byte(cfg), 0o644) }); err != nil {
		return nil, err
	}
	for _, m := range syslinuxModules {
		files = append(files, bootFile{Src: filepath.Join(syslinuxModuleDir, m), Dst: "/" + m})
	}
	trust := imagefile.Trust{AllowUnsigned: key == nil}
	if key != nil {
		trust.Keys = []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	}
	if err := add(TrustPath, "upgrade.pub", func(p string) error { return os.WriteFile(p, imagefile.MarshalTrust(trust), 0o644) }); err != nil {
		return nil, err
	}
	for _, s := range Slots {
		k, i, m := SlotPaths(s)
		var err error
		if s == "a" {
			err = errors.Join(
				add(k, "a-vmlinuz", func(p string) error { return padFile(slot.Kernel, p, plan.KernelBytes) }),
				add(i, "a-initrd", func(p string) error { return padFile(slot.Initrd, p, plan.InitrdBytes) }),
				add(m, "a-manifest", func(p string) error { return writeSlotManifest(p, header) }))
		} else {
			err = errors.Join(
				add(k, s+"-vmlinuz", func(p string) error { return zeroFile(p, plan.KernelBytes) }),
				add(i, s+"-initrd", func(p string) error { return zeroFile(p, plan.InitrdBytes) }),
				add(m, s+"-manifest", func(p string) error { return zeroFile(p, slotManifestBytes) }))
		}
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// TrustPath is the file on the boot partition that says which upgrade
// signatures the box accepts.
const TrustPath = "/upgrade.pub"

// syslinuxModuleDir holds the BIOS com32 modules (syslinux-common).
const syslinuxModuleDir = "/usr/lib/syslinux/modules/bios"

// checkFit refuses firmware that does not fit the boot partition of the
// board's smallest card, with the numbers.
func checkFit(rep *Report) error {
	if need := rep.FirmwareBytes() + slotOverhead; need > rep.BootBytes {
		return fmt.Errorf("%w: %s firmware is %d bytes (kernel %d + initramfs %d), plus %d for syslinux, but a %d MB card leaves %d bytes for the boot partition",
			ErrDoesNotFit, rep.Board, rep.FirmwareBytes(), rep.KernelBytes, rep.InitramfsBytes, slotOverhead, rep.MinCardMB, rep.BootBytes)
	}
	return nil
}

func (b *Builder) logf(format string, args ...any) {
	if b.Log != nil {
		fmt.Fprintf(b.Log, format+"\n", args...)
	}
}

// fatEpochFloor is the earliest time FAT can store (1980-01-01), plus a day
// so that no time zone arithmetic can push it below.
var fatEpochFloor = time.Date(1980, 1, 2, 0, 0, 0, 0, time.UTC)

// SourceDateEpoch is the time stamped on everything in an image:
// $SOURCE_DATE_EPOCH if set (the reproducible-builds convention), else the
// time of the last commit of the tree at repoRoot, else a fixed date.
func SourceDateEpoch(repoRoot string) time.Time {
	t := fatEpochFloor
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			t = time.Unix(n, 0).UTC()
		}
	} else if out, err := (command{Dir: repoRoot}).run(context.Background(), "git", "log", "-1", "--format=%ct"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil {
			t = time.Unix(n, 0).UTC()
		}
	}
	if t.Before(fatEpochFloor) {
		t = fatEpochFloor
	}
	return t
}

// FindRepoRoot walks up from dir to the directory holding the flashgate
// go.mod.
func FindRepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/flashgate/flashgate\n") {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("%s is not inside the flashgate source tree (no go.mod of github.com/flashgate/flashgate above it)", dir)
		}
	}
}

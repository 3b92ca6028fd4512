package images

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

const (
	mib = 1 << 20

	// bootStart is where partition 1 begins: 1 MiB, the alignment every
	// partitioning tool uses, and room for syslinux's MBR in sector 0.
	bootStart = 1 * mib

	// maxCardImage caps the image on large cards: firmware slots and the
	// config fit in far less, and `flash` then writes 96 MiB, not gigabytes.
	maxCardImage = 96 * mib
)

// Layout is where the partitions lie in a card image.
type Layout struct {
	CardBytes   int64 // size of the image file
	BootStart   int64 // partition 1: FAT16, syslinux, firmware slots A and B
	BootBytes   int64
	ConfigStart int64 // partition 2: ext3 "fgconfig"
	ConfigBytes int64
}

// PlanLayout lays a card out for the smallest card a board supports. Card
// makers count in decimal megabytes and some "32 MB" cards hold less than
// 32,000,000 bytes, so the image is the card's decimal size rounded down to
// whole MiB (a 32 MB card gets a 30 MiB image).
func PlanLayout(minCardMB int) (Layout, error) {
	card := int64(minCardMB) * 1000 * 1000 / mib * mib
	if card > maxCardImage {
		card = maxCardImage
	}
	config := int64(4 * mib)
	if card >= 64*mib {
		config = 16 * mib
	}
	l := Layout{
		CardBytes:   card,
		BootStart:   bootStart,
		ConfigBytes: config,
	}
	l.ConfigStart = card - config
	l.BootBytes = l.ConfigStart - l.BootStart
	// FAT16 needs at least 4085 clusters: about 2 MiB at 512-byte
	// clusters. Whether the firmware fits is checked once it is built.
	if l.BootBytes < 4*mib {
		return Layout{}, fmt.Errorf("a %d MB card leaves %d bytes for the boot partition, too small for a firmware slot", minCardMB, l.BootBytes)
	}
	return l, nil
}

// sfdiskScript is the partition table of l for sfdisk: MBR, partition 1
// FAT16 (type 6, understood by every BIOS of this era) and bootable,
// partition 2 Linux.
func (l Layout) sfdiskScript(diskID uint32) string {
	return fmt.Sprintf("label: dos\nlabel-id: 0x%08x\nunit: sectors\n\n"+
		"start=%d, size=%d, type=6, bootable\nstart=%d, size=%d, type=83\n",
		diskID, l.BootStart/512, l.BootBytes/512, l.ConfigStart/512, l.ConfigBytes/512)
}

// cardIDs are the identifiers that tools would otherwise draw at random,
// derived from what the card is for so that the same inputs give the same
// bytes, while two boards' cards still differ.
type cardIDs struct {
	DiskID     uint32 // MBR disk signature
	VolumeID   uint32 // FAT volume serial
	ConfigUUID string // ext2 UUID
	HashSeed   string // ext2 directory hash seed
}

func deriveCardIDs(board, version string) cardIDs {
	sum := sha256.Sum256([]byte("flashgate card\x00" + board + "\x00" + version))
	uuid := func(b []byte) string {
		u := append([]byte(nil), b[:16]...)
		u[6] = u[6]&0x0f | 0x40 // version 4 layout, as mke2fs would draw
		u[8] = u[8]&0x3f | 0x80
		return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	}
	ids := cardIDs{
		DiskID:   binary.BigEndian.Uint32(sum[0:4]) | 1, // never zero: zero means "none"
		VolumeID: binary.BigEndian.Uint32(sum[4:8]),
	}
	ids.ConfigUUID = uuid(sum[8:24])
	more := sha256.Sum256(sum[:])
	ids.HashSeed = uuid(more[:16])
	return ids
}

// bootFile is a file to put on the boot partition.
type bootFile struct {
	Src string // host path
	Dst string // path on the FAT file system, e.g. "/a/vmlinuz"
}

// cardBuild is one run of laying out a card image.
type cardBuild struct {
	Image  string
	Layout Layout
	IDs    cardIDs
	Epoch  time.Time // every timestamp on the card
	Work   string    // scratch directory
}

// toolEnv pins what the file system tools would otherwise take from the
// clock or the host: time (SOURCE_DATE_EPOCH for mtools and syslinux,
// E2FSPROGS_FAKE_TIME for mke2fs), the time zone (FAT stores local time) and
// mtools' configuration.
func (c *cardBuild) toolEnv() []string {
	e := strconv.FormatInt(c.Epoch.Unix(), 10)
	return []string{"SOURCE_DATE_EPOCH=" + e, "E2FSPROGS_FAKE_TIME=" + e, "TZ=UTC",
		"MTOOLSRC=/dev/null", "MTOOLS_SKIP_CHECK=1", "LC_ALL=C"}
}

// mtoolsImage is the mtools name of the boot partition: image@@offset.
func (c *cardBuild) mtoolsImage() string {
	return fmt.Sprintf("%s@@%d", c.Image, c.Layout.BootStart)
}

// create writes the partition table and both file systems, with files on
// the boot partition and syslinux installed.
func (c *cardBuild) create(ctx context.Context, files []bootFile) error {
	l := c.Layout
	env := c.toolEnv()
	f, err := os.OpenFile(c.Image, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if err := f.Truncate(l.CardBytes); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if _, err := (command{Env: env, Stdin: []byte(l.sfdiskScript(c.IDs.DiskID))}).run(ctx, tool(toolSfdisk),
		"--no-reread", "--no-tell-kernel", "--wipe", "never", "--quiet", c.Image); err != nil {
		return fmt.Errorf("partition the card: %w", err)
	}
	// -h: the hidden-sectors field must say where the partition starts,
	// or syslinux's boot sector looks for ldlinux.sys in the wrong place.
	if _, err := (command{Env: env}).run(ctx, tool(toolMkfsVfat), "-F", "16", "-n", "FGBOOT",
		// --invariant first: it also sets a constant volume ID, which -i
		// then replaces with ours.
		"--invariant", "-i", fmt.Sprintf("%08x", c.IDs.VolumeID),
		"--offset", strconv.FormatInt(l.BootStart/512, 10), "-h", strconv.FormatInt(l.BootStart/512, 10),
		c.Image, strconv.FormatInt(l.BootBytes/1024, 10)); err != nil {
		return fmt.Errorf("make the boot file system: %w", err)
	}
	if err := c.copyBootFiles(ctx, files); err != nil {
		return err
	}
	if err := installSyslinux(ctx, c.Image, l.BootStart, env); err != nil {
		return err
	}
	if err := pinFATTimes(c.Image, l.BootStart, c.Epoch); err != nil {
		return fmt.Errorf("pin boot partition timestamps: %w", err)
	}
	if err := c.makeConfigFS(ctx); err != nil {
		return err
	}
	if err := pinExt2Times(c.Image, l.ConfigStart, c.Epoch); err != nil {
		return fmt.Errorf("pin config partition timestamps: %w", err)
	}
	return nil
}

// copyBootFiles copies files onto the boot partition with mtools, with
// their modification times set to the epoch first (mcopy -m keeps them).
func (c *cardBuild) copyBootFiles(ctx context.Context, files []bootFile) error {
	env := c.toolEnv()
	img := c.mtoolsImage()
	dirs := map[string]bool{}
	for _, f := range files {
		for d := filepath.Dir(f.Dst); d != "/" && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	var sorted []string
	for d := range dirs {
		sorted = append(sorted, d)
	}
	// Parents before children: "/a" sorts before "/a/b".
	sort.Strings(sorted)
	for _, d := range sorted {
		if _, err := (command{Env: env}).run(ctx, tool(toolMmd), "-i", img, "::"+d); err != nil {
			return fmt.Errorf("make %s on the boot partition: %w", d, err)
		}
	}
	for _, f := range files {
		staged := filepath.Join(c.Work, "boot", strings.TrimPrefix(f.Dst, "/"))
		if _, err := copyFile(f.Src, staged); err != nil {
			return fmt.Errorf("stage %s: %w", f.Dst, err)
		}
		if err := os.Chtimes(staged, c.Epoch, c.Epoch); err != nil {
			return err
		}
		if _, err := (command{Env: env}).run(ctx, tool(toolMcopy), "-m", "-o", "-i", img, staged, "::"+f.Dst); err != nil {
			return fmt.Errorf("copy %s to the boot partition: %w", f.Dst, err)
		}
	}
	return nil
}

// makeConfigFS creates the empty config partition, labelled fgconfig so
// that PID 1 finds it by its superblock. It is ext3, which the kernel's ext4
// driver mounts: ext2 plus a journal (1 MiB, the least mke2fs makes), so a
// power cut during a commit is replayed at the next mount instead of
// leaving a bitmap wrong and the file system "not clean" for good. ext3's
// on-disk layout is otherwise ext2's (128-byte inodes on a partition this
// small, no metadata checksums), so pinExt2Times still applies.
func (c *cardBuild) makeConfigFS(ctx context.Context) error {
	l := c.Layout
	empty := filepath.Join(c.Work, "config-root")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		return err
	}
	if err := os.Chtimes(empty, c.Epoch, c.Epoch); err != nil {
		return err
	}
	ext := fmt.Sprintf("offset=%d,hash_seed=%s,root_owner=0:0,nodiscard", l.ConfigStart, c.IDs.HashSeed)
	if _, err := (command{Env: c.toolEnv()}).run(ctx, tool(toolMke2fs), "-q", "-F", "-t", "ext3",
		"-J", "size=1", "-L", "fgconfig", "-U", c.IDs.ConfigUUID, "-b", "1024", "-E", ext, "-d", empty,
		c.Image, strconv.FormatInt(l.ConfigBytes/1024, 10)); err != nil {
		return fmt.Errorf("make the config file system: %w", err)
	}
	return nil
}

// bootFreeBytes asks mtools how much of the boot partition is free.
func (c *cardBuild) bootFreeBytes(ctx context.Context) (int64, error) {
	out, err := (command{Env: c.toolEnv()}).run(ctx, tool(toolMdir), "-i", c.mtoolsImage(), "::/")
	if err != nil {
		return 0, fmt.Errorf("list the boot partition: %w", err)
	}
	return parseMdirFree(out)
}

// parseMdirFree reads the "N bytes free" line of mdir output. mtools groups
// digits with spaces ("26 214 400 bytes free").
func parseMdirFree(out []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		num, ok := strings.CutSuffix(strings.TrimSpace(sc.Text()), "bytes free")
		if !ok {
			continue
		}
		num = strings.Join(strings.Fields(num), "")
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("mdir free space %q is not a byte count", strings.TrimSpace(sc.Text()))
		}
		return n, nil
	}
	return 0, fmt.Errorf("mdir output has no \"bytes free\" line")
}

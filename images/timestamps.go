package images

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"
)

// The tools that write the card stamp the wall clock into it: mtools and
// syslinux into FAT directory entries (creation times, and the files
// syslinux installs), mke2fs 1.47.0 into the superblock and the reserved
// inodes (it honours no SOURCE_DATE_EPOCH). For reproducible images those
// stamps are rewritten to the build epoch after the tools ran. The formats
// are small and fixed, so this is done here rather than with more tools.

// pinFATTimes sets every timestamp of every directory entry in the FAT16
// file system at offset in img to t (UTC; FAT stores local time, and the
// card has no time zone).
func pinFATTimes(img string, offset int64, t time.Time) error {
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	boot := make([]byte, 512)
	if _, err := f.ReadAt(boot, offset); err != nil {
		return fmt.Errorf("read FAT boot sector: %w", err)
	}
	fs, err := parseFAT16(boot)
	if err != nil {
		return err
	}
	fat := make([]byte, int64(fs.fatSectors)*int64(fs.sectorSize))
	if _, err := f.ReadAt(fat, offset+int64(fs.reserved)*int64(fs.sectorSize)); err != nil {
		return fmt.Errorf("read FAT: %w", err)
	}
	date, clock := fatDateTime(t)
	dirs := []fatRegion{fs.rootRegion()}
	visited := map[uint16]bool{}
	for len(dirs) > 0 {
		d := dirs[0]
		dirs = dirs[1:]
		for _, r := range d.expand(fs, fat) {
			buf := make([]byte, r.length)
			if _, err := f.ReadAt(buf, offset+r.start); err != nil {
				return fmt.Errorf("read FAT directory: %w", err)
			}
			sub, changed := stampFATEntries(buf, date, clock)
			for _, c := range sub {
				if c >= 2 && !visited[c] {
					visited[c] = true
					dirs = append(dirs, fatRegion{cluster: c})
				}
			}
			if changed {
				if _, err := f.WriteAt(buf, offset+r.start); err != nil {
					return fmt.Errorf("write FAT directory: %w", err)
				}
			}
		}
	}
	return f.Close()
}

// fat16 is the geometry of a FAT16 file system, from its BIOS parameter block.
type fat16 struct {
	sectorSize        int
	sectorsPerCluster int
	reserved          int
	fats              int
	rootEntries       int
	fatSectors        int
	totalSectors      int
}

func parseFAT16(boot []byte) (fat16, error) {
	if len(boot) < 512 || boot[510] != 0x55 || boot[511] != 0xaa {
		return fat16{}, errors.New("no FAT boot sector signature")
	}
	fs := fat16{
		sectorSize:        int(binary.LittleEndian.Uint16(boot[11:])),
		sectorsPerCluster: int(boot[13]),
		reserved:          int(binary.LittleEndian.Uint16(boot[14:])),
		fats:              int(boot[16]),
		rootEntries:       int(binary.LittleEndian.Uint16(boot[17:])),
		totalSectors:      int(binary.LittleEndian.Uint16(boot[19:])),
		fatSectors:        int(binary.LittleEndian.Uint16(boot[22:])),
	}
	if fs.totalSectors == 0 {
		fs.totalSectors = int(binary.LittleEndian.Uint32(boot[32:]))
	}
	switch {
	case fs.sectorSize < 512 || fs.sectorSize > 4096 || fs.sectorSize&(fs.sectorSize-1) != 0:
		return fat16{}, fmt.Errorf("FAT sector size %d", fs.sectorSize)
	case fs.sectorsPerCluster == 0 || fs.sectorsPerCluster&(fs.sectorsPerCluster-1) != 0:
		return fat16{}, fmt.Errorf("FAT sectors per cluster %d", fs.sectorsPerCluster)
	case fs.reserved == 0 || fs.fats == 0 || fs.fatSectors == 0 || fs.rootEntries == 0:
		return fat16{}, errors.New("not a FAT12/16 file system (FAT32 or damaged)")
	case fs.dataStart() >= fs.totalSectors:
		return fat16{}, errors.New("FAT geometry leaves no data area")
	}
	return fs, nil
}

func (fs fat16) rootSectors() int {
	return (fs.rootEntries*32 + fs.sectorSize - 1) / fs.sectorSize
}

func (fs fat16) dataStart() int {
	return fs.reserved + fs.fats*fs.fatSectors + fs.rootSectors()
}

func (fs fat16) rootRegion() fatRegion {
	return fatRegion{start: int64(fs.reserved+fs.fats*fs.fatSectors) * int64(fs.sectorSize),
		length: int64(fs.rootSectors() * fs.sectorSize)}
}

// fatRegion is a directory: the fixed root region, or a cluster chain.
type fatRegion struct {
	cluster       uint16 // first cluster of a subdirectory, or 0 for a fixed region
	start, length int64  // the fixed region, relative to the file system
}

// expand turns a directory into the byte ranges holding its entries,
// following the FAT chain with a bound so that a loop cannot hang us.
func (r fatRegion) expand(fs fat16, fat []byte) []fatRegion {
	if r.cluster == 0 {
		return []fatRegion{r}
	}
	clusterBytes := int64(fs.sectorsPerCluster * fs.sectorSize)
	maxCluster := (fs.totalSectors-fs.dataStart())/fs.sectorsPerCluster + 1
	var out []fatRegion
	for c, n := r.cluster, 0; c >= 2 && int(c) <= maxCluster && n < 65536; n++ {
		out = append(out, fatRegion{start: int64(fs.dataStart())*int64(fs.sectorSize) + int64(c-2)*clusterBytes, length: clusterBytes})
		if int(c)*2+2 > len(fat) {
			break
		}
		c = binary.LittleEndian.Uint16(fat[int(c)*2:])
		if c >= 0xfff8 {
			break
		}
	}
	return out
}

// stampFATEntries sets the times of the directory entries in buf and
// returns the first clusters of the subdirectories it lists.
func stampFATEntries(buf []byte, date, clock uint16) (subdirs []uint16, changed bool) {
	for off := 0; off+32 <= len(buf); off += 32 {
		e := buf[off : off+32]
		if e[0] == 0x00 {
			break // no entries after this one
		}
		if e[0] == 0xe5 || e[11] == 0x0f {
			continue // deleted, or a long-name part (which has no times)
		}
		e[13] = 0
		binary.LittleEndian.PutUint16(e[14:], clock) // created
		binary.LittleEndian.PutUint16(e[16:], date)
		binary.LittleEndian.PutUint16(e[18:], date)  // accessed
		binary.LittleEndian.PutUint16(e[22:], clock) // written
		binary.LittleEndian.PutUint16(e[24:], date)
		changed = true
		if e[11]&0x10 != 0 && e[0] != '.' {
			subdirs = append(subdirs, binary.LittleEndian.Uint16(e[26:]))
		}
	}
	return subdirs, changed
}

// fatDateTime encodes t in FAT's date and time fields (2-second resolution).
func fatDateTime(t time.Time) (date, clock uint16) {
	t = t.UTC()
	date = uint16(t.Year()-1980)<<9 | uint16(t.Month())<<5 | uint16(t.Day())
	clock = uint16(t.Hour())<<11 | uint16(t.Minute())<<5 | uint16(t.Second()/2)
	return date, clock
}

// Offsets in the ext2 superblock and inode (from the ext2/ext4 on-disk format).
const (
	ext2Magic            = 0xef53
	ext2SuperMagic       = 0x38
	ext2SuperWtime       = 0x30
	ext2SuperLastcheck   = 0x40
	ext2SuperMkfsTime    = 0x108
	ext2RoCompatGDTCsum  = 0x10
	ext2RoCompatMetaCsum = 0x400
)

// pinExt2Times sets the superblock times and the times of every inode of
// the ext2 file system at offset in img to t, where they are set at all.
func pinExt2Times(img string, offset int64, t time.Time) error {
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	sb := make([]byte, 1024)
	if _, err := f.ReadAt(sb, offset+1024); err != nil {
		return fmt.Errorf("read ext2 superblock: %w", err)
	}
	geo, err := parseExt2Super(sb)
	if err != nil {
		return err
	}
	stamp := uint32(t.Unix())
	set := func(b []byte, at int) {
		if binary.LittleEndian.Uint32(b[at:]) != 0 {
			binary.LittleEndian.PutUint32(b[at:], stamp)
		}
	}
	// Every group that carries a superblock copy (sparse_super: 0, 1 and
	// powers of 3, 5, 7) is recognised by its magic.
	for g := 0; g < geo.groups; g++ {
		at := offset + int64(g*geo.blocksPerGroup+geo.firstDataBlock)*int64(geo.blockSize)
		if g == 0 {
			at = offset + 1024
		}
		copyBuf := make([]byte, 1024)
		if _, err := f.ReadAt(copyBuf, at); err != nil || binary.LittleEndian.Uint16(copyBuf[ext2SuperMagic:]) != ext2Magic {
			continue
		}
		for _, field := range []int{ext2SuperWtime, ext2SuperLastcheck, ext2SuperMkfsTime} {
			set(copyBuf, field)
		}
		if _, err := f.WriteAt(copyBuf, at); err != nil {
			return fmt.Errorf("write ext2 superblock: %w", err)
		}
	}
	gdt := make([]byte, geo.groups*32)
	if _, err := f.ReadAt(gdt, offset+int64(geo.firstDataBlock+1)*int64(geo.blockSize)); err != nil {
		return fmt.Errorf("read ext2 group descriptors: %w", err)
	}
	table := make([]byte, geo.inodesPerGroup*geo.inodeSize)
	for g := 0; g < geo.groups; g++ {
		at := offset + int64(binary.LittleEndian.Uint32(gdt[g*32+8:]))*int64(geo.blockSize)
		if _, err := f.ReadAt(table, at); err != nil {
			return fmt.Errorf("read ext2 inode table of group %d: %w", g, err)
		}
		for i := 0; i < geo.inodesPerGroup; i++ {
			ino := table[i*geo.inodeSize : (i+1)*geo.inodeSize]
			for _, field := range []int{0x08, 0x0c, 0x10} { // atime, ctime, mtime
				set(ino, field)
			}
			// crtime lives in the extra fields of large inodes.
			if geo.inodeSize >= 0x98 && 0x80+int(binary.LittleEndian.Uint16(ino[0x80:])) >= 0x98 {
				set(ino, 0x90)
			}
		}
		if _, err := f.WriteAt(table, at); err != nil {
			return fmt.Errorf("write ext2 inode table of group %d: %w", g, err)
		}
	}
	return f.Close()
}

type ext2Geometry struct {
	blockSize, blocksPerGroup, firstDataBlock int
	inodesPerGroup, inodeSize, groups         int
}

func parseExt2Super(sb []byte) (ext2Geometry, error) {
	if len(sb) < 1024 || binary.LittleEndian.Uint16(sb[ext2SuperMagic:]) != ext2Magic {
		return ext2Geometry{}, errors.New("no ext2 superblock")
	}
	roCompat := binary.LittleEndian.Uint32(sb[0x64:])
	if roCompat&(ext2RoCompatGDTCsum|ext2RoCompatMetaCsum) != 0 {
		// Checksummed metadata would need its checksums redone.
		return ext2Geometry{}, errors.New("ext2 file system has metadata checksums; cannot pin its timestamps")
	}
	logBlock := binary.LittleEndian.Uint32(sb[0x18:])
	if logBlock > 6 {
		return ext2Geometry{}, fmt.Errorf("ext2 block size 1024<<%d", logBlock)
	}
	g := ext2Geometry{
		blockSize:      1024 << logBlock,
		blocksPerGroup: int(binary.LittleEndian.Uint32(sb[0x20:])),
		firstDataBlock: int(binary.LittleEndian.Uint32(sb[0x14:])),
		inodesPerGroup: int(binary.LittleEndian.Uint32(sb[0x28:])),
		inodeSize:      128,
	}
	if binary.LittleEndian.Uint32(sb[0x4c:]) >= 1 { // dynamic revision
		g.inodeSize = int(binary.LittleEndian.Uint16(sb[0x58:]))
	}
	blocks := int64(binary.LittleEndian.Uint32(sb[0x04:]))
	switch {
	case g.blocksPerGroup <= 0 || g.blocksPerGroup > 8*g.blockSize:
		return ext2Geometry{}, fmt.Errorf("ext2 blocks per group %d", g.blocksPerGroup)
	case g.inodeSize < 128 || g.inodeSize > g.blockSize || g.inodeSize&(g.inodeSize-1) != 0:
		return ext2Geometry{}, fmt.Errorf("ext2 inode size %d", g.inodeSize)
	case g.inodesPerGroup <= 0 || g.inodesPerGroup > 8*g.blockSize:
		return ext2Geometry{}, fmt.Errorf("ext2 inodes per group %d", g.inodesPerGroup)
	case blocks <= int64(g.firstDataBlock):
		return ext2Geometry{}, fmt.Errorf("ext2 block count %d", blocks)
	}
	g.groups = int((blocks - int64(g.firstDataBlock) + int64(g.blocksPerGroup) - 1) / int64(g.blocksPerGroup))
	if g.groups*32 > g.blockSize*g.blocksPerGroup {
		return ext2Geometry{}, fmt.Errorf("ext2 group count %d", g.groups)
	}
	return g, nil
}

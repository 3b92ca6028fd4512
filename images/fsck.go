package images

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

var (
	toolFsckVfat = hostTool{"fsck.vfat", "dosfstools"}
	toolE2fsck   = hostTool{"e2fsck", "e2fsprogs"}
	toolDumpe2fs = hostTool{"dumpe2fs", "e2fsprogs"}
)

// CheckCard checks both file systems of a card image without changing it
// (fsck.vfat -n on p1, e2fsck -fn on p2, on copies of the partitions: the
// tools take no offset), and that p2 is journalled. The error quotes what
// the checker said. The power-cut tests call it after every trial.
func CheckCard(ctx context.Context, card string) error {
	if err := checkTools(toolFsckVfat, toolE2fsck, toolDumpe2fs); err != nil {
		return err
	}
	f, err := os.Open(card)
	if err != nil {
		return err
	}
	defer f.Close()
	mbr := make([]byte, 512)
	if _, err := io.ReadFull(f, mbr); err != nil {
		return fmt.Errorf("read the partition table of %s: %w", card, err)
	}
	tmp, err := os.MkdirTemp("", "flashgate-fsck-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	part := func(i int) (string, error) {
		e := mbr[446+16*i:]
		start, n := int64(binary.LittleEndian.Uint32(e[8:]))*512, int64(binary.LittleEndian.Uint32(e[12:]))*512
		if n == 0 {
			return "", fmt.Errorf("%s has no partition %d", card, i+1)
		}
		p := filepath.Join(tmp, fmt.Sprintf("p%d", i+1))
		out, err := os.Create(p)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(out, io.NewSectionReader(f, start, n))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		return p, err
	}
	p1, err := part(0)
	if err != nil {
		return err
	}
	if out, err := (command{}).run(ctx, tool(toolFsckVfat), "-n", p1); err != nil {
		return fmt.Errorf("fsck.vfat -n of the boot partition: %w\n%s", err, out)
	}
	p2, err := part(1)
	if err != nil {
		return err
	}
	if out, err := (command{}).run(ctx, tool(toolE2fsck), "-fn", p2); err != nil {
		return fmt.Errorf("e2fsck -fn of the config partition: %w\n%s", err, out)
	}
	out, err := (command{}).run(ctx, tool(toolDumpe2fs), "-h", p2)
	if err != nil {
		return fmt.Errorf("dumpe2fs -h of the config partition: %w", err)
	}
	if !strings.Contains(string(out), "has_journal") {
		return fmt.Errorf("the config partition has no journal (made before it was ext3?)")
	}
	return nil
}

package images

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// hostTool is a program the builder runs on the host, with the Debian package
// that provides it, so that a missing tool can be reported as the one command
// that fixes it.
type hostTool struct {
	Name    string // program name or absolute path of a data file
	Package string // Debian package
}

var (
	toolAptCache = hostTool{"apt-cache", "apt"}
	toolAptGet   = hostTool{"apt-get", "apt"}
	toolDpkgDeb  = hostTool{"dpkg-deb", "dpkg"}
	toolDepmod   = hostTool{"depmod", "kmod"}
	toolModprobe = hostTool{"modprobe", "kmod"}
	toolZstd     = hostTool{"zstd", "zstd"}
	toolSfdisk   = hostTool{"sfdisk", "fdisk"}
	toolMkfsVfat = hostTool{"mkfs.vfat", "dosfstools"}
	toolMcopy    = hostTool{"mcopy", "mtools"}
	toolMmd      = hostTool{"mmd", "mtools"}
	toolMdir     = hostTool{"mdir", "mtools"}
	toolMdel     = hostTool{"mdel", "mtools"}
	toolSyslinux = hostTool{"syslinux", "syslinux"}
	toolMBR      = hostTool{"/usr/lib/syslinux/mbr/mbr.bin", "syslinux-common"}
	toolMke2fs   = hostTool{"mke2fs", "e2fsprogs"}
	toolMenuC32  = hostTool{"/usr/lib/syslinux/modules/bios/menu.c32", "syslinux-common"}
	toolGo       = hostTool{"go", "golang-go (or Go from go.dev)"}
	toolTimeout  = hostTool{"timeout", "coreutils"}
	// the kernel build
	toolMake    = hostTool{"make", "make"}
	toolGCC     = hostTool{"gcc", "gcc"}
	toolFlex    = hostTool{"flex", "flex"}
	toolBison   = hostTool{"bison", "bison"}
	toolBc      = hostTool{"bc", "bc"}
	toolLibelf  = hostTool{"/usr/include/libelf.h", "libelf-dev"}
	toolOpenSSL = hostTool{"/usr/include/openssl/ssl.h", "libssl-dev"}
)

// buildTools are the tools Build needs.
var buildTools = []hostTool{toolAptCache, toolAptGet, toolDpkgDeb, toolDepmod, toolModprobe,
	toolZstd, toolSfdisk, toolMkfsVfat, toolMcopy, toolMmd, toolMdir, toolSyslinux, toolMBR,
	toolMke2fs, toolGo, toolMake, toolGCC, toolFlex, toolBison, toolBc, toolLibelf, toolOpenSSL, toolMenuC32}

// sbinDirs are searched after $PATH: depmod, sfdisk and mke2fs live in
// /usr/sbin, which is not on an ordinary user's $PATH on Debian.
var sbinDirs = []string{"/usr/sbin", "/sbin"}

// lookTool returns the path of t, or an error if it is not installed.
func lookTool(t hostTool) (string, error) {
	if filepath.IsAbs(t.Name) {
		if _, err := os.Stat(t.Name); err != nil {
			return "", err
		}
		return t.Name, nil
	}
	if p, err := exec.LookPath(t.Name); err == nil {
		return p, nil
	}
	for _, dir := range sbinDirs {
		p := filepath.Join(dir, t.Name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// MissingToolsError names the tools that are not installed and the Debian
// packages that provide them.
type MissingToolsError struct {
	Tools    []string
	Packages []string
}

func (e *MissingToolsError) Error() string {
	return fmt.Sprintf("%s not installed: run `apt-get install %s` as root",
		strings.Join(e.Tools, ", "), strings.Join(e.Packages, " "))
}

// CheckTools reports every tool of tools that is missing, in one error.
func checkTools(tools ...hostTool) error {
	var missing []string
	pkgs := map[string]bool{}
	for _, t := range tools {
		if _, err := lookTool(t); err != nil {
			missing = append(missing, t.Name)
			pkgs[t.Package] = true
		}
	}
	if len(missing) == 0 {
		return nil
	}
	e := &MissingToolsError{Tools: missing}
	for p := range pkgs {
		e.Packages = append(e.Packages, p)
	}
	sort.Strings(e.Packages)
	return e
}

// CheckBuildTools reports the host tools Build needs that are missing.
func CheckBuildTools() error { return checkTools(buildTools...) }

// CheckQEMUTools reports the host tools needed to boot binary (a qemu-system
// program) that are missing.
func CheckQEMUTools(binary string) error {
	return checkTools(hostTool{binary, "qemu-system-x86"}, toolTimeout, toolMcopy)
}

// IsMissingTools reports whether err says that host tools are missing.
func IsMissingTools(err error) bool {
	var m *MissingToolsError
	return errors.As(err, &m)
}

// tool returns the path of t; callers have run checkTools first, so a
// failure here means the host changed under us and the command fails with
// exec's own error.
func tool(t hostTool) string {
	if p, err := lookTool(t); err == nil {
		return p
	}
	return t.Name
}

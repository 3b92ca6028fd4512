//go:build tools

// This file is never built. It records, for `go mod tidy`, the packages the
// image builder compiles from this module's go.mod without importing them:
// the u-root command (built as a host tool) and the u-root core commands
// that go into the initramfs (ExpertCommands).
package images

import (
	_ "github.com/u-root/u-root"
	_ "github.com/u-root/u-root/cmds/core/cat"
	_ "github.com/u-root/u-root/cmds/core/cp"
	_ "github.com/u-root/u-root/cmds/core/df"
	_ "github.com/u-root/u-root/cmds/core/dmesg"
	_ "github.com/u-root/u-root/cmds/core/free"
	_ "github.com/u-root/u-root/cmds/core/gosh"
	_ "github.com/u-root/u-root/cmds/core/ip"
	_ "github.com/u-root/u-root/cmds/core/kill"
	_ "github.com/u-root/u-root/cmds/core/ls"
	_ "github.com/u-root/u-root/cmds/core/mkdir"
	_ "github.com/u-root/u-root/cmds/core/mount"
	_ "github.com/u-root/u-root/cmds/core/mv"
	_ "github.com/u-root/u-root/cmds/core/ping"
	_ "github.com/u-root/u-root/cmds/core/ps"
	_ "github.com/u-root/u-root/cmds/core/rm"
	_ "github.com/u-root/u-root/cmds/core/umount"
	_ "github.com/u-root/u-root/cmds/core/uname"
)

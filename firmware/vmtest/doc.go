// Package vmtest boots the real qemu board image and checks, over its
// serial console, what only a running appliance shows: PID 1 restarts a
// killed service and counts it, `flashgate reboot` brings the box back to
// a login prompt, `flashgate poweroff` makes qemu exit 0, and stopping the
// watchdog's petting resets the VM. It uses the image builder and the qemu
// harness of package images; the tests are skipped with -short.
package vmtest

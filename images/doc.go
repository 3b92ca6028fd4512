// Package images builds flashgate's CompactFlash card images and boots them.
//
// It owns the path from a board definition to a bootable card: the board's
// kernel built from Debian's kernel source package with the fragments of
// package kernel (cached by input, so only a changed input rebuilds it;
// modules only for optional cards), a u-root initramfs carrying the appliance's multi-call binary,
// and the card image itself (MBR, a FAT16 boot partition with syslinux and
// room for a second firmware slot, an ext2 config partition). Cards are laid
// out in a plain file with sfdisk, mkfs, mtools and syslinux --offset: no
// loop devices, no mounts, no root. The same inputs give the same bytes.
//
// It also knows how to start a board's image in qemu (software emulation) and
// how to write an image to a real card safely.
package images

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/images"
	"github.com/flashgate/flashgate/kernel"
	"github.com/flashgate/flashgate/kernel/cpuclass"
)

// runKernels builds (or finds in the kernel cache) the kernel of every
// supported board, or of one, and prints what each is and what it cost.
// `make test` runs it first, so that the tests find every kernel built and
// a cold machine shows the kernel builds' progress on its own.
func runKernels(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("kernels", stderr)
	board := fs.String("board", "", "only this board (default: every supported board)")
	cache := fs.String("cache", "", "kernel cache directory (default "+images.DefaultKernelCache()+")")
	if err := parse(fs, args); err != nil {
		return err
	}
	var list []boards.Board
	if *board != "" {
		b, err := boards.Lookup(*board)
		if err != nil {
			return err
		}
		list = append(list, b)
	} else {
		for _, b := range boards.All() {
			if b.Unsupported == "" {
				list = append(list, b)
			}
		}
	}
	fmt.Fprintf(stdout, "kernels from %s %s into %s\n", kernel.SourcePackage, kernel.SourceVersion, cacheOr(*cache))
	kb := &images.KernelBuild{CacheDir: *cache, Log: stderr}
	// The classes build side by side, each in its own tree and each board
	// of a class after the other: a board's incremental build is mostly
	// single-threaded (kconfig, the link, kallsyms, compressing bzImage),
	// and the other class's compiling fills the cores meanwhile.
	type result struct {
		k       *images.Kernel
		elapsed time.Duration
		err     error
	}
	// The qemu boards first in their class: the VM tests of `make test`
	// boot only the qemu board, and start while the others build.
	later := func(b boards.Board) int {
		if strings.HasPrefix(b.Name, "qemu") {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(list, func(a, b boards.Board) int { return cmp.Compare(later(a), later(b)) })
	results := make([]result, len(list))
	byClass := map[cpuclass.Class][]int{}
	var classes []cpuclass.Class
	for i, b := range list {
		if _, ok := byClass[b.KernelClass]; !ok {
			classes = append(classes, b.KernelClass)
		}
		byClass[b.KernelClass] = append(byClass[b.KernelClass], i)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range classes {
		wg.Add(1)
		go func(idx []int) {
			defer wg.Done()
			for _, i := range idx {
				t0 := time.Now()
				k, err := kb.Build(ctx, list[i])
				results[i] = result{k, time.Since(t0), err}
				if err != nil {
					cancel() // the first failure ends the other class's build too
					return
				}
			}
		}(byClass[c])
	}
	wg.Wait()
	for _, r := range results { // the failure itself, not the builds it cancelled
		if r.err != nil && !errors.Is(r.err, context.Canceled) {
			return r.err
		}
	}
	for i, r := range results {
		if r.err != nil || r.k == nil {
			return fmt.Errorf("kernel for %s: %w", list[i].Name, cmp.Or(r.err, context.Canceled))
		}
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "board\trelease\tclass\tbzImage\tthis run\tcompiling took")
	for i, b := range list {
		k := results[i].k
		how := "cached"
		if k.Built {
			how = "built"
		}
		if k.SameAs != "" {
			how = "copy of " + k.SameAs
		}
		size := "?"
		if n, err := fileSize(k.Vmlinuz); err == nil {
			size = fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s %.1f s\t%.0f s\n", b.Name, k.Release, k.Class, size, how,
			results[i].elapsed.Seconds(), k.BuildTime.Seconds())
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%d kernels in %.1f s (%d classes side by side)\n", len(list), time.Since(start).Seconds(), len(classes))
	return nil
}

func cacheOr(dir string) string {
	if dir != "" {
		return dir
	}
	return images.DefaultKernelCache()
}

func fileSize(name string) (int64, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/images"
	"github.com/flashgate/flashgate/kernel"
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
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "board\trelease\tclass\tbzImage\tthis run\tcompiling took")
	start := time.Now()
	for _, b := range list {
		t0 := time.Now()
		k, err := kb.Build(ctx, b)
		if err != nil {
			tw.Flush()
			return err
		}
		how := "cached"
		if k.Built {
			how = "built"
		}
		size := "?"
		if n, err := fileSize(k.Vmlinuz); err == nil {
			size = fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s %.1f s\t%.0f s\n", b.Name, k.Release, k.Class, size, how,
			time.Since(t0).Seconds(), k.BuildTime.Seconds())
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%d kernels in %.1f s\n", len(list), time.Since(start).Seconds())
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

package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/images"
)

// BenchmarkUpgradePowerCut pulls the plug at random moments of an
// upgrade, from the start of the upload to the new firmware's health
// checks, then boots the card again without interference and counts it
// bricked unless it comes up with a web UI, runs v1 or v2 (not a half
// state), still has the admin's setting, and both file systems are clean
// by fsck.vfat -n and e2fsck -fn. Trials: $FLASHGATE_POWERCUT_TRIALS
// (default 100, the target; each takes one to two minutes in software
// emulation; $FLASHGATE_POWERCUT_PARALLEL boxes run at once, default 2).
//
// Reported: upgrade.powercut.trials (cuts made), .bricked, .not_run
// (trials whose pristine card did not come up three times, so no cut was
// made), and upgrade.total_s (start of the upload to the new version
// committed, from an uncut run).
func BenchmarkUpgradePowerCut(b *testing.B) {
	trials := 100
	if v, err := strconv.Atoi(os.Getenv("FLASHGATE_POWERCUT_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	ctx := context.Background()
	l := prepareUpgradeCard(b)
	b.Cleanup(func() {
		if b.Failed() && l.vm != nil {
			log := l.vm.Log()
			if len(log) > 15000 {
				log = log[len(log)-15000:]
			}
			b.Logf("serial console (end):\n%s", log)
		}
		l.stop()
	})
	if err := l.boot(true); err != nil {
		b.Fatal(err)
	}
	var sys map[string]any
	if err := l.box.Get(ctx, "/api/v1/system", &sys); err != nil {
		b.Fatal(err)
	}
	settings, _ := sys["settings"].(map[string]any)
	settings["hostname"] = "powercut-box"
	if err := l.box.Put(ctx, "/api/v1/system", settings); err != nil {
		b.Fatal(err)
	}
	if err := l.box.Post(ctx, "/api/v1/commit", map[string]any{}); err != nil {
		b.Fatal(err)
	}
	l.stop()
	golden, err := os.ReadFile(l.card)
	if err != nil {
		b.Fatal(err)
	}
	v1, v2 := l.base.Version, l.base.Version+"-v2"
	file := l.variant(b, v2, l.base.Built+100, l.key, "qemu", nil)

	// One uncut upgrade: the total time, and the span the cuts fall in.
	if err := l.boot(false); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := l.box.Upload(ctx, file, false, true, nil); err != nil {
		b.Fatal(err)
	}
	written := time.Since(start) // upload, write, read back and switch
	if err := l.box.WaitResult(ctx, v2, 8*time.Minute, nil); err != nil {
		b.Fatalf("uncut upgrade: %v", err)
	}
	total := time.Since(start)
	l.stop()
	b.Logf("upgrade.total_s %.1f (the slot was written and switched after %.1f s)", total.Seconds(), written.Seconds())

	// Trials run on $FLASHGATE_POWERCUT_PARALLEL boxes at once (default:
	// one per CPU, at most 2), each on its own copy of the card and its
	// own web UI port: a trial is mostly a box booting in software
	// emulation, one CPU each.
	workers := min(runtime.NumCPU(), 2)
	if v, err := strconv.Atoi(os.Getenv("FLASHGATE_POWERCUT_PARALLEL")); err == nil && v > 0 {
		workers = v
	}
	workers = min(workers, trials)
	labs := make([]*upgradeLab, workers)
	for k := range labs {
		w := *l
		w.vm, w.logs = nil, nil
		w.card = filepath.Join(l.dir, fmt.Sprintf("card-%d.img", k))
		labs[k] = &w
	}
	b.Cleanup(func() {
		for _, w := range labs {
			w.stop()
		}
	})
	seed := time.Now().UnixNano()
	// A bricked card and its console log are kept for a post-mortem, out
	// of the benchmark's temporary directory (removed when it ends).
	keep := filepath.Join(os.TempDir(), fmt.Sprintf("flashgate-powercut-%d", seed))
	progress(b, "%d trials on %d boxes at once, seed %d; uncut upgrade %.1f s (slot written after %.1f s)", trials, workers, seed, total.Seconds(), written.Seconds())
	r := rand.New(rand.NewSource(seed))
	type trial struct {
		n   int
		cut time.Duration
	}
	todo := make(chan trial, trials)
	for i := 0; i < trials; i++ {
		// Every other cut falls while the slot is written (a few
		// seconds of the whole, which is mostly the reboot and the
		// test boot), so both get their share.
		span := total
		if i%2 == 1 {
			span = written + time.Second
		}
		todo <- trial{i + 1, time.Duration(r.Int63n(int64(span)))}
	}
	close(todo)
	var mu sync.Mutex
	bricked, made, notRun := 0, 0, 0
	var setupErr error
	var wg sync.WaitGroup
	b.ResetTimer()
	for _, w := range labs {
		wg.Add(1)
		go func(w *upgradeLab) {
			defer wg.Done()
			for t := range todo {
				if err := os.WriteFile(w.card, golden, 0o644); err != nil {
					mu.Lock()
					setupErr = err
					mu.Unlock()
					return
				}
				// A pristine card that does not come up (the machine was
				// too loaded for the boot's limits) is no power cut: boot
				// it again, and count the trial only once it was cut.
				why, cut := "", false
				for attempt := 0; attempt < 3 && !cut; attempt++ {
					if attempt > 0 {
						progress(b, "trial %d/%d: no cut made (%s); again", t.n, trials, why)
						if err := os.WriteFile(w.card, golden, 0o644); err != nil {
							mu.Lock()
							setupErr = err
							mu.Unlock()
							return
						}
					}
					why, cut = powerCutTrial(ctx, w, file, t.cut, v1, v2)
					if !cut {
						// Keep the console of a boot that did not come
						// up: a stall of the firmware's own looks the
						// same as a starved machine from here.
						os.MkdirAll(keep, 0o755)
						os.WriteFile(fmt.Sprintf("%s/notrun-%d-%d.log", keep, t.n, attempt+1), w.logs, 0o644)
						progress(b, "trial %d: the console of that boot is in %s", t.n, keep)
						w.logs = nil
					}
				}
				mu.Lock()
				if cut {
					made++
				} else {
					notRun++
				}
				mu.Unlock()
				if !cut {
					progress(b, "trial %d/%d: NOT RUN: the pristine card never came up: %s", t.n, trials, why)
				} else if why != "" {
					mu.Lock()
					bricked++
					mu.Unlock()
					progress(b, "trial %d/%d, cut %.1f s into the upgrade: BRICKED: %s", t.n, trials, t.cut.Seconds(), why)
					os.MkdirAll(keep, 0o755)
					os.WriteFile(fmt.Sprintf("%s/bricked-%d.img", keep, t.n), mustRead(w.card), 0o644)
					os.WriteFile(fmt.Sprintf("%s/bricked-%d.log", keep, t.n), w.logs, 0o644)
					progress(b, "trial %d: its card and console log are in %s", t.n, keep)
				} else {
					progress(b, "trial %d/%d, cut %.1f s into the upgrade: ok", t.n, trials, t.cut.Seconds())
				}
				w.logs = nil
			}
		}(w)
	}
	wg.Wait()
	if setupErr != nil {
		b.Fatal(setupErr)
	}
	b.StopTimer()
	b.ReportMetric(float64(made), "trials")
	b.ReportMetric(float64(bricked), "bricked")
	b.ReportMetric(float64(notRun), "not_run")
	b.ReportMetric(total.Seconds(), "total_s")
}

// progress logs a trial and also prints it at once on stderr: a benchmark's
// log appears only when it ends, and a run of 100 trials takes hours, so
// whoever watches it (or stops it early) sees how far it got.
func progress(b *testing.B, format string, args ...any) {
	b.Helper()
	b.Logf(format, args...)
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

func mustRead(p string) []byte { b, _ := os.ReadFile(p); return b }

// powerCutTrial boots the card, starts the upgrade, kills qemu cut after
// the upload began, boots again and returns what is wrong ("" if
// nothing); made is false when the pristine card did not come up, so no
// cut was made.
func powerCutTrial(ctx context.Context, l *upgradeLab, file string, cut time.Duration, v1, v2 string) (why string, made bool) {
	if err := l.boot(false); err != nil {
		l.stop()
		return "the pristine card did not boot: " + err.Error(), false
	}
	return powerCut(ctx, l, file, cut, v1, v2), true
}

// powerCut is powerCutTrial once the pristine card is up.
func powerCut(ctx context.Context, l *upgradeLab, file string, cut time.Duration, v1, v2 string) string {
	go l.box.Upload(ctx, file, false, true, nil)
	time.Sleep(cut)
	l.stop() // the plug
	if err := l.boot(false); err != nil {
		l.stop()
		return "no web UI after the cut: " + err.Error()
	}
	defer l.stop()
	// A cut after the switch leaves a test boot to finish: wait for it.
	deadline := time.Now().Add(6 * time.Minute)
	for {
		st, err := l.box.Status(ctx)
		if err == nil && st.Boot != nil && !st.Boot.Trial {
			if st.Running.Version != v1 && st.Running.Version != v2 {
				return "runs " + st.Running.Version
			}
			break
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("the test boot never ended (%+v, %v)", st, err)
		}
		time.Sleep(3 * time.Second)
		l.box.Login(ctx) // a fallback reboot ends the session
	}
	var sys map[string]any
	if err := l.box.Get(ctx, "/api/v1/system", &sys); err != nil {
		return "read the configuration: " + err.Error()
	}
	// Form values are lists: ["powercut-box"].
	if s, _ := sys["settings"].(map[string]any); s == nil || fmt.Sprint(s["hostname"]) != "[powercut-box]" {
		return fmt.Sprintf("the configuration lost the host name: %v", sys["settings"])
	}
	l.stop()
	if err := images.CheckCard(ctx, l.card); err != nil {
		return err.Error()
	}
	return ""
}

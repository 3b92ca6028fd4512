package webui

import (
	"os"
	"sync"
	"time"
)

// localtimeFile is the box's time zone, which hostd rewrites when the
// configured zone changes (services/hostd localtime.go).
const localtimeFile = "/etc/localtime"

// zone is the time zone the pages show times in. Go reads /etc/localtime
// once per process (time.Local), so the web UI reads it itself, again
// whenever the file changes: a new zone shows on the next page, without
// restarting the web UI and ending everyone's login.
var zone = &fileZone{path: localtimeFile}

// fileZone is the zone in a TZif file, reloaded when the file's size or
// modification time changes; UTC while there is no readable file.
type fileZone struct {
	path string

	mu   sync.Mutex
	mod  time.Time
	size int64
	loc  *time.Location
}

func (z *fileZone) Location() *time.Location {
	fi, err := os.Stat(z.path)
	if err != nil {
		return time.UTC
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.loc != nil && fi.ModTime().Equal(z.mod) && fi.Size() == z.size {
		return z.loc
	}
	data, err := os.ReadFile(z.path)
	if err != nil {
		return time.UTC
	}
	loc, err := time.LoadLocationFromTZData("Local", data)
	if err != nil {
		return time.UTC
	}
	z.loc, z.mod, z.size = loc, fi.ModTime(), fi.Size()
	return loc
}

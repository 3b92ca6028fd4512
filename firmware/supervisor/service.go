package supervisor

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// RestartPolicy says what the supervisor does when a service exits without
// having been asked to stop.
type RestartPolicy int

const (
	// RestartAlways restarts the service whatever its exit status: appliance
	// services are meant to run forever, and a clean exit is as unexpected as
	// a crash.
	RestartAlways RestartPolicy = iota
	// RestartOnFailure restarts it only after a non-zero exit or a signal.
	RestartOnFailure
	// RestartNever leaves it stopped (one-shot jobs).
	RestartNever
)

func (p RestartPolicy) String() string {
	switch p {
	case RestartAlways:
		return "always"
	case RestartOnFailure:
		return "on-failure"
	case RestartNever:
		return "never"
	}
	return fmt.Sprintf("RestartPolicy(%d)", int(p))
}

// Service declares one supervised process. The table of services is data:
// the supervisor starts them in declaration order, and a service may only
// depend on services declared before it, so the declaration order is always
// a valid start order and a dependency cycle cannot be written down.
type Service struct {
	Name string   // unique, used in the API and logs: "configd"
	Path string   // absolute path of the executable
	Args []string // arguments after argv[0]
	Env  []string // environment; nil means a minimal PATH-only environment

	// After lists services this one waits for before it first starts (and
	// when it is started again after a stop): each must be ready, that is
	// running and, if it declares NotifiesReady, have said so in this run.
	// The wait is bounded by AfterWait: then the service starts without
	// the dependencies that are not ready, and the supervisor logs which,
	// so that a broken configd never leaves the box without a console or
	// a web UI. Restarts after an exit (backoff) do not wait again.
	After []string

	// AfterWait bounds the wait for After, from when the service begins
	// to wait (the supervisor's Start, or a Restart of a stopped
	// service). Zero means DefaultAfterWait.
	AfterWait time.Duration

	// NotifiesReady says the service tells the supervisor when it is
	// ready to serve, by calling NotifyReady (ready.go): a socket bound
	// is not enough for configd, which binds its sockets before it opens
	// the database. The supervisor hands it the write end of a pipe as
	// the descriptor after its ExtraFiles, named in the environment as
	// ReadyFDEnv. Without NotifiesReady a service is ready once it runs.
	NotifiesReady bool

	// Needs lists conditions (Config.Conditions) that must have been
	// provided before this service first starts, such as "modules" for a
	// service that needs kernel modules PID 1 loads after the console is
	// up. A provided condition holds for good: restarts do not wait again.
	Needs []string

	Restart RestartPolicy

	// StopTimeout is how long a SIGTERM is given before SIGKILL. Zero means
	// DefaultStopTimeout.
	StopTimeout time.Duration

	// User, if set, runs the service as that numeric user and group,
	// with only the supplementary groups and capabilities it names; a
	// service started as a non-zero uid keeps no other capability. nil
	// runs it as root, like PID 1. Either way it runs with no_new_privs
	// (nonewprivs.go): no set-user-ID or file-capability binary raises it.
	User *User

	// Syscalls is the seccomp filter the service runs under
	// (syscallfilter.go): SyscallsNetworkService for those that parse
	// what the network sends. The zero value filters nothing.
	Syscalls SyscallFilter

	// ExtraFiles are handed to every run of the service as descriptors 3,
	// 4, ... in order: sockets PID 1 opened for it (the web UI's listeners
	// on 443 and 80, which a non-root process cannot bind). The
	// supervisor keeps them open and never closes them.
	ExtraFiles []*os.File
}

// User is a numeric user and group to run a service as. The initramfs has
// no user database: the numbers are the names.
type User struct {
	UID, GID uint32

	// Groups are supplementary groups (e.g. the one that may use another
	// service's socket). None by default.
	Groups []uint32

	// Caps are the capabilities (unix.CAP_NET_ADMIN, ...) the service
	// keeps across the change of user, as ambient capabilities: iked needs
	// CAP_NET_ADMIN for XFRM and CAP_NET_BIND_SERVICE for port 500, and
	// nothing else of root's. Its children inherit them.
	Caps []uintptr
}

// DefaultStopTimeout is the grace period between SIGTERM and SIGKILL.
const DefaultStopTimeout = 5 * time.Second

// DefaultAfterWait bounds how long a service waits for its After
// dependencies to be ready.
const DefaultAfterWait = 30 * time.Second

// afterWait is the service's bound on waiting for its After.
func (s *Service) afterWait() time.Duration {
	if s.AfterWait > 0 {
		return s.AfterWait
	}
	return DefaultAfterWait
}

// validateTable checks that names are unique and non-empty, paths are
// absolute and dependencies name earlier services.
func validateTable(table []Service, conditions []string) error {
	seen := map[string]bool{}
	declared := map[string]bool{}
	for _, c := range conditions {
		if c == "" || declared[c] {
			return fmt.Errorf("condition %q is empty or declared twice", c)
		}
		declared[c] = true
	}
	for i, s := range table {
		if s.Name == "" {
			return fmt.Errorf("service %d: empty name", i)
		}
		if seen[s.Name] {
			return fmt.Errorf("service %q declared twice", s.Name)
		}
		if len(s.Path) == 0 || s.Path[0] != '/' {
			return fmt.Errorf("service %q: path %q is not absolute", s.Name, s.Path)
		}
		for _, dep := range s.After {
			if !seen[dep] {
				return fmt.Errorf("service %q depends on %q, which is not declared before it", s.Name, dep)
			}
		}
		if _, err := s.Syscalls.program(); err != nil {
			return fmt.Errorf("service %q: %w", s.Name, err)
		}
		if s.AfterWait < 0 {
			return fmt.Errorf("service %q: negative AfterWait %s", s.Name, s.AfterWait)
		}
		if s.User != nil && s.User.UID == 0 {
			return fmt.Errorf("service %q: User with uid 0 (leave User nil to run as root)", s.Name)
		}
		if s.User != nil {
			for _, c := range s.User.Caps {
				if c > unix.CAP_LAST_CAP {
					return fmt.Errorf("service %q: capability %d does not exist (the last is %d)", s.Name, c, unix.CAP_LAST_CAP)
				}
			}
		}
		for i, f := range s.ExtraFiles {
			if f == nil {
				return fmt.Errorf("service %q: extra file %d (fd %d) is nil", s.Name, i, 3+i)
			}
		}
		for _, c := range s.Needs {
			if !declared[c] {
				return fmt.Errorf("service %q needs condition %q, which is not declared", s.Name, c)
			}
		}
		seen[s.Name] = true
	}
	return nil
}

package pid1

import (
	"os"
	"strconv"
)

// consoleLogLevel is the kernel's console log level once the services
// start: warnings and worse still reach the serial console, information
// (a NIC's probe, a link coming up, the config partition's remounts) goes
// only to the kernel's ring, which the supervisor keeps (`flashgate logs
// kernel`). The service modules load while the console asks for a
// password, and their messages would land in the middle of the prompt;
// on a 19200-baud Soekris console each line also costs the CPU that
// prints it half a second. The boot up to PID 1 stays fully logged, and a
// loglevel=, debug or quiet on the kernel command line is left alone.
const consoleLogLevel = 5 // prints KERN_EMERG (0) to KERN_WARNING (4)

// quietConsole sets the console log level, the first field of
// /proc/sys/kernel/printk.
func quietConsole() error {
	return os.WriteFile("/proc/sys/kernel/printk", []byte(strconv.Itoa(consoleLogLevel)), 0o644)
}

package images

import "testing"

func TestURootFailure(t *testing.T) {
	stderr := "06:05:38 WARN You are not using one of the recommended Go versions\n\t\tSome packages may not compile.\n" +
		"06:05:38 ERROR Preserving temp dir due to busybox build error\n" +
		"06:05:38 ERROR mkuimage error: error building: gobusybox build failed: main.go:39:23: undefined: iked.IPsecMain\n"
	if got, want := urootFailure(stderr), "error building: gobusybox build failed: main.go:39:23: undefined: iked.IPsecMain"; got != want {
		t.Errorf("urootFailure = %q, want %q", got, want)
	}
	if got := urootFailure("something else\n"); got != "" {
		t.Errorf("urootFailure of a log without an error line = %q, want \"\"", got)
	}
}

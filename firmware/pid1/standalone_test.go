package pid1

import (
	"slices"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/firmware/supervisor"
)

func TestSelectServices(t *testing.T) {
	table := []supervisor.Service{
		{Name: "configd", Path: "/x"},
		{Name: "netd", Path: "/x", After: []string{"configd"}},
		{Name: "webui", Path: "/x", After: []string{"configd", "netd"}},
	}
	names := func(ss []supervisor.Service) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Name+"<"+strings.Join(s.After, "+"))
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct{ list, want, wantErr string }{
		{"", "", ""},
		{"all", "configd< netd<configd webui<configd+netd", ""},
		{"webui, configd", "configd< webui<configd", ""},
		{"netd", "netd<", ""},
		{"netd,nosuch", "", `no service "nosuch"`},
	} {
		got, err := selectServices(table, tc.list)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("selectServices(%q) error %v, want %q", tc.list, err, tc.wantErr)
			}
			continue
		}
		if err != nil || names(got) != tc.want {
			t.Errorf("selectServices(%q) = %q, %v; want %q", tc.list, names(got), err, tc.want)
		}
	}
	if !slices.Equal(table[2].After, []string{"configd", "netd"}) {
		t.Errorf("selectServices changed the table it was given: %v", table[2].After)
	}
}

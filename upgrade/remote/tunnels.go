package remote

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/flashgate/flashgate/config"
)

// ImportTunnels saves tunnels into the box's candidate through its JSON
// API (PUT /api/v1/tunnels/NAME), as `flashgate import -box` does. When
// the box already has a tunnel of one of the names, nothing is saved.
// The admin reviews and commits the changes on the box.
func (b *Box) ImportTunnels(ctx context.Context, tunnels []config.Tunnel) error {
	var existing []struct {
		Name string `json:"name"`
	}
	if err := b.Get(ctx, "/api/v1/tunnels", &existing); err != nil {
		return fmt.Errorf("list the box's tunnels: %w", err)
	}
	var clash []string
	for _, t := range tunnels {
		for _, e := range existing {
			if e.Name == t.Name {
				clash = append(clash, t.Name)
			}
		}
	}
	if len(clash) > 0 {
		return fmt.Errorf("the box already has tunnels called %s; rename or delete them first (nothing was imported)", strings.Join(clash, ", "))
	}
	for _, t := range tunnels {
		if err := b.Put(ctx, "/api/v1/tunnels/"+url.PathEscape(t.Name), tunnelBody(t)); err != nil {
			return fmt.Errorf("save tunnel %s: %w", t.Name, err)
		}
	}
	return nil
}

// tunnelBody is a tunnel as PUT /api/v1/tunnels/NAME takes it: the
// tunnel form's fields, values in their text form.
func tunnelBody(t config.Tunnel) map[string]any {
	strs := func(l []config.Prefix) []string {
		out := make([]string, len(l))
		for i, p := range l {
			out[i] = p.String()
		}
		return out
	}
	return map[string]any{
		"enabled": t.Enabled, "remote_address": t.RemoteAddress.String(), "local_address": t.LocalAddress.String(),
		"remote_id": t.RemoteID, "local_id": t.LocalID, "psk": t.PSK.Reveal(),
		"local_subnets": strs(t.LocalSubnets), "remote_subnets": strs(t.RemoteSubnets),
		"ike_proposals": t.IKEProposals, "esp_proposals": t.ESPProposals,
		"start_action": t.StartAction, "data_plane": t.DataPlane,
		"ike_lifetime": t.IKELifetime.String(), "child_lifetime": t.ChildLifetime.String(),
		"dpd_interval": t.DPDInterval.String(), "dpd_timeout": t.DPDTimeout.String(),
		"ike_version": fmt.Sprint(int(t.IKEVersion.Or2())), "legacy_algorithms": t.LegacyAlgorithms,
	}
}

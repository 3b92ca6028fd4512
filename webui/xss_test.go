package webui

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/webui/markup"
)

// hostileStrings are what an attacker who controls a tunnel name, a peer's
// identity, a log line or a certificate subject would try.
var hostileStrings = []string{
	`<script>alert(1)</script>`,
	`"><img src=x onerror=alert(1)>`,
	`javascript:alert(1)`,
	`' onmouseover='x`,
	`</textarea>`,
	`{{.}}`,
}

// TestPagesEscapeHostileData draws every page and live region with a
// hostile string in every string field of its data (and of the layout's
// view, and of the configuration a form offers choices from), once with
// every flag set and once with none, and parses the result as a browser
// would: no script but the layout's own, no event handler attribute, no
// javascript: URL, no injected element, and the hostile string intact as
// text or attribute value.
func TestPagesEscapeHostileData(t *testing.T) {
	for _, h := range hostileStrings {
		for _, flags := range []bool{true, false} {
			for name, draw := range hostilePages(h, flags) {
				var p markup.Writer
				if err := drawPage(&p, draw); err != nil {
					t.Errorf("%s with %q (flags %v): %v", name, h, flags, err)
					continue
				}
				checkHostilePage(t, name+" with "+h, p.String(), h)
			}
		}
	}
}

// hostilePages are the pages and live regions with their data filled with
// h; flags is the value of every bool.
func hostilePages(h string, flags bool) map[string]func(p *markup.Writer) {
	var v view
	fillHostile(&v, h, flags)
	inLayout := func(content func(p *markup.Writer, v *view)) func(p *markup.Writer) {
		return func(p *markup.Writer) { layout(p, &v, content) }
	}
	pages := map[string]func(p *markup.Writer){}

	var login loginView
	fillHostile(&login, h, flags)
	login.NoAdmin = false
	pages["login"] = func(p *markup.Writer) { loginPage(p, login) }
	pages["login, no admin (shows no data)"] = func(p *markup.Writer) { loginPage(p, loginView{NoAdmin: true, Error: h}) }

	var dash Dashboard
	fillHostile(&dash, h, flags)
	for i := range dash.Tunnels {
		dash.Tunnels[i].Graph = rateGraph(dash.Tunnels[i].Rates, 240, 48)
	}
	pages["dashboard"] = inLayout(func(p *markup.Writer, v *view) { dashboardPage(p, v, dash) })

	var list tunnelList
	fillHostile(&list, h, flags)
	list.Total, list.Pages = 12, 2 // the filter and the pager show
	for i := range list.Rows {
		list.Rows[i].Graph = rateGraph(list.Rows[i].Rates, 240, 48)
	}
	pages["tunnels"] = inLayout(func(p *markup.Writer, v *view) { tunnelsPage(p, v, list) })

	for _, mode := range []string{config.ModeRoute, h} {
		var d TunnelDetail
		fillHostile(&d, h, flags)
		d.Config.Mode = mode
		pages["tunnel "+mode] = inLayout(func(p *markup.Writer, v *view) { tunnelPage(p, v, d) })
	}

	var certs certsData
	fillHostile(&certs, h, flags)
	pages["certificates"] = inLayout(func(p *markup.Writer, v *view) { certificatesPage(p, v, &certs) })

	var changes Changes
	fillHostile(&changes, h, flags)
	pages["changes"] = inLayout(func(p *markup.Writer, v *view) { changesPage(p, v, changes) })

	for _, k := range append([]*kind{kindSystem}, kindsOf()...) {
		form := hostileForm(k, h, flags)
		pages["element "+k.Name] = inLayout(func(p *markup.Writer, v *view) { elementPage(p, v, form) })
	}

	var fw config.Firewall
	fillHostile(&fw, h, flags)
	pages["firewall"] = inLayout(func(p *markup.Writer, v *view) { firewallPage(p, v, fw) })

	var imp importView
	fillHostile(&imp, h, flags)
	pages["import"] = inLayout(func(p *markup.Writer, v *view) { importPage(p, v, imp) })

	var ifs interfacesView
	fillHostile(&ifs, h, flags)
	pages["interfaces"] = inLayout(func(p *markup.Writer, v *view) { interfacesPage(p, v, ifs) })

	var logs LogsView
	fillHostile(&logs, h, flags)
	pages["logs"] = inLayout(func(p *markup.Writer, v *view) { logsPage(p, v, logs) })

	var routes routesView
	fillHostile(&routes, h, flags)
	routes.Routes[0].Interface = h // a route through a route tunnel
	pages["routes"] = inLayout(func(p *markup.Writer, v *view) { routesPage(p, v, routes) })

	var sys systemData
	fillHostile(&sys, h, flags)
	sys.Settings = hostileForm(kindSystem, h, flags)
	sys.PasswordErr = formErrors{"": h, "current": h, "new": h, "repeat": h}
	pages["system"] = inLayout(func(p *markup.Writer, v *view) { systemPage(p, v, sys) })
	return pages
}

// kindsOf lists the element kinds in a fixed order.
func kindsOf() []*kind {
	return []*kind{kindTunnels, kindRules, kindForwards, kindMasquerade, kindExemptions, kindInterfaces, kindRoutes}
}

// hostileForm is k's form with h in every value, every error, the name,
// the action, the ports, the proposal catalog and the configuration its
// choices come from.
func hostileForm(k *kind, h string, flags bool) *formState {
	f := &formState{Kind: k, Name: h, New: flags, Action: h, Ports: []string{h, h},
		Values: map[string][]string{}, Errors: formErrors{"": h, "name": h}}
	f.Catalog = &proposalCatalog{}
	fillHostile(f.Catalog, h, flags)
	f.Config = &config.Config{}
	fillHostile(f.Config, h, flags)
	for _, fl := range k.Fields {
		f.Values[fl.Key] = []string{h}
		if fl.Kind == fCheck && flags {
			f.Values[fl.Key] = []string{"true"}
		}
		f.Errors[fl.Key] = h
	}
	return f
}

var trustedType = reflect.TypeFor[markup.Trusted]()

// fillHostile sets every string reachable from ptr to h, every bool to flag,
// every number to 12, and gives empty slices two elements and nil pointers
// a value, so that every part of a page shows. Trusted markup is left
// alone: only the graph builder makes that.
func fillHostile(ptr any, h string, flag bool) {
	fillValue(reflect.ValueOf(ptr).Elem(), h, flag, 0)
}

func fillValue(v reflect.Value, h string, flag bool, depth int) {
	if depth > 8 || !v.CanSet() {
		return
	}
	switch v.Kind() {
	case reflect.String:
		if v.Type() != trustedType {
			v.SetString(h)
		}
	case reflect.Bool:
		v.SetBool(flag)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Type() == reflect.TypeFor[time.Duration]() {
			v.SetInt(int64(12 * time.Hour))
		} else {
			v.SetInt(12)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(12)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(12.5)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillValue(v.Elem(), h, flag, depth+1)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			fillValue(v.Field(i), h, flag, depth+1)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		}
		for i := range v.Len() {
			fillValue(v.Index(i), h, flag, depth+1)
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		key := reflect.New(v.Type().Key()).Elem()
		key.SetString(h)
		val := reflect.New(v.Type().Elem()).Elem()
		fillValue(val, h, flag, depth+1)
		v.SetMapIndex(key, val)
	}
}

// checkHostilePage parses a page and checks that h did not get out of
// its text or attribute value.
func checkHostilePage(t *testing.T, name, page, h string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("%s: parse: %v", name, err)
	}
	intact := false
	for n := range doc.Descendants() {
		switch n.Type {
		case html.TextNode:
			intact = intact || strings.Contains(n.Data, h)
		case html.ElementNode:
			attrs := map[string]string{}
			for _, a := range n.Attr {
				attrs[a.Key] = a.Val
				intact = intact || strings.Contains(a.Val, h)
				if strings.HasPrefix(a.Key, "on") {
					t.Errorf("%s: <%s> has the event handler %s=%q", name, n.Data, a.Key, a.Val)
				}
				switch a.Key {
				case "href", "src", "action", "formaction":
					u := strings.ToLower(strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(strings.TrimLeft(a.Val, " \x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f")))
					for _, bad := range []string{"javascript:", "data:", "vbscript:"} {
						if strings.HasPrefix(u, bad) {
							t.Errorf("%s: <%s %s=%q>", name, n.Data, a.Key, a.Val)
						}
					}
				}
			}
			switch n.Data {
			case "script":
				if attrs["src"] != "/static/app.js" || n.FirstChild != nil {
					t.Errorf("%s: a script that is not the layout's: %v", name, n.Attr)
				}
			case "img":
				if !strings.HasPrefix(attrs["src"], "/static/") {
					t.Errorf("%s: an injected image: %v", name, n.Attr)
				}
			}
		}
	}
	if !intact && !strings.Contains(name, "shows no data") {
		t.Errorf("%s: the hostile string %q appears nowhere intact", name, h)
	}
}

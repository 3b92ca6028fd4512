package webui

import (
	"net/http"
	"sort"
	"testing"
)

// parsedPages is the names of the pages whose templates the server holds.
func parsedPages(s *Server) []string {
	s.pages.mu.Lock()
	defer s.pages.mu.Unlock()
	var names []string
	for n := range s.pages.parsed {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// TestPagesParsedOnFirstRender: a UI nobody browses holds no parsed
// templates (about a megabyte of heap); a page rendered once keeps its
// own, and only its own.
func TestPagesParsedOnFirstRender(t *testing.T) {
	h := newHarness(t, true)
	if got := parsedPages(h.srv); len(got) != 0 {
		t.Fatalf("a new server holds the templates of %v", got)
	}
	if len(h.srv.pages.files) < 10 {
		t.Fatalf("the server knows %d pages: %v", len(h.srv.pages.files), h.srv.pages.files)
	}
	b := h.browser()
	for range 2 {
		if r := b.get("/login"); r.Code != http.StatusOK {
			t.Fatalf("GET /login: %d", r.Code)
		}
		if got := parsedPages(h.srv); len(got) != 1 || got[0] != "login" {
			t.Fatalf("after the login page the server holds %v, want [login]", got)
		}
	}
	b.login()
	if r := b.get("/tunnels"); r.Code != http.StatusOK {
		t.Fatalf("GET /tunnels: %d", r.Code)
	}
	got := parsedPages(h.srv)
	if len(got) < 2 || len(got) >= len(h.srv.pages.files) {
		t.Errorf("after login and the tunnels page the server holds %v", got)
	}
}

// TestEveryPageParses: each page's templates parse (New checks them all
// and fails on one that does not).
func TestEveryPageParses(t *testing.T) {
	p, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	for name := range p.files {
		if tmpl, ok, err := p.lookup(name); !ok || err != nil || tmpl == nil {
			t.Errorf("page %s: %v, %v", name, ok, err)
		}
	}
	if _, ok, _ := p.lookup("no-such-page"); ok {
		t.Error("lookup of a page that does not exist says ok")
	}
}

package webui

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"

	"github.com/flashgate/flashgate/internal/localapi"

	"github.com/gorilla/mux"

	"github.com/flashgate/flashgate/config"
)

// The JSON API does what the pages do, with the same validation (see
// docs/api.md). It authenticates with the session cookie from
// POST /api/v1/login and wants the session's CSRF token in X-CSRF-Token on
// every request that changes something.

func (s *Server) apiRoutes(r *mux.Router) {
	api := func(path, method string, h http.HandlerFunc) {
		r.HandleFunc(path, h).Methods(method)
	}
	api("/session", "GET", s.apiSession)
	s.upgradeRoutes(api)
	api("/logout", "POST", s.apiLogout)
	api("/dashboard", "GET", func(w http.ResponseWriter, r *http.Request) {
		localapi.WriteJSON(w, http.StatusOK, s.dashboard(r.Context()))
	})
	api("/proposals", "GET", func(w http.ResponseWriter, r *http.Request) {
		localapi.WriteJSON(w, http.StatusOK, s.proposals)
	})
	api("/psk", "GET", func(w http.ResponseWriter, r *http.Request) {
		localapi.WriteJSON(w, http.StatusOK, map[string]string{"psk": generatePSK()})
	})
	api("/tunnels", "GET", func(w http.ResponseWriter, r *http.Request) {
		rows, err := s.tunnelRows(r.Context())
		if err != nil {
			localapi.WriteError(w, http.StatusBadGateway, err.Error())
			return
		}
		localapi.WriteJSON(w, http.StatusOK, rows)
	})
	api("/tunnels/{name}", "GET", func(w http.ResponseWriter, r *http.Request) {
		d, ok := s.tunnelDetail(r.Context(), mux.Vars(r)["name"])
		if !ok {
			localapi.WriteError(w, http.StatusNotFound, "no such tunnel")
			return
		}
		localapi.WriteJSON(w, http.StatusOK, d)
	})
	for _, action := range []string{"up", "down"} {
		api("/tunnels/{name}/"+action, "POST", func(w http.ResponseWriter, r *http.Request) {
			if err := s.tunnelAction(r.Context(), mux.Vars(r)["name"], action); err != nil {
				localapi.WriteError(w, http.StatusConflict, err.Error())
				return
			}
			localapi.WriteJSON(w, http.StatusAccepted, map[string]string{"result": action + " requested"})
		})
	}
	api("/routes", "GET", func(w http.ResponseWriter, r *http.Request) {
		routes, err := s.routeList(r.Context())
		if err != nil {
			localapi.WriteError(w, http.StatusBadGateway, err.Error())
			return
		}
		localapi.WriteJSON(w, http.StatusOK, routes)
	})
	for _, k := range []*kind{kindTunnels, kindRules, kindForwards, kindMasquerade, kindExemptions, kindInterfaces, kindRoutes} {
		api("/"+k.Name+"/{name}", "PUT", s.apiPutElement(k))
		api("/"+k.Name+"/{name}", "DELETE", s.apiDeleteElement(k))
	}
	api("/firewall", "GET", func(w http.ResponseWriter, r *http.Request) {
		cand, err := s.candidate(r.Context())
		if err != nil {
			localapi.WriteError(w, http.StatusBadGateway, err.Error())
			return
		}
		localapi.WriteJSON(w, http.StatusOK, cand.Config.Firewall)
	})
	api("/rules/{name}/move", "POST", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Direction string `json:"direction"`
		}
		if !decodeAPI(w, r, &req) {
			return
		}
		if err := s.moveRule(r, mux.Vars(r)["name"], req.Direction); err != nil {
			localapi.WriteError(w, http.StatusUnprocessableEntity, err.Error())
			return
		}
		localapi.WriteJSON(w, http.StatusOK, map[string]string{"result": "moved"})
	})
	api("/interfaces", "GET", func(w http.ResponseWriter, r *http.Request) {
		rows, other, err := s.interfaceRows(r)
		if err != nil {
			localapi.WriteError(w, http.StatusBadGateway, err.Error())
			return
		}
		localapi.WriteJSON(w, http.StatusOK, map[string]any{"configured": rows, "other": other})
	})
	api("/system", "GET", func(w http.ResponseWriter, r *http.Request) {
		cand, err := s.candidate(r.Context())
		if err != nil {
			localapi.WriteError(w, http.StatusBadGateway, err.Error())
			return
		}
		vals, _ := kindSystem.values(cand.Config, "")
		localapi.WriteJSON(w, http.StatusOK, map[string]any{"settings": vals, "board": s.opts.Board,
			"time": s.opts.Now().UTC(), "certificate_sha256": s.opts.Fingerprint})
	})
	api("/system", "PUT", s.apiPutElement(kindSystem))
	api("/system/password", "POST", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Current string `json:"current"`
			New     string `json:"new"`
		}
		if !decodeAPI(w, r, &req) {
			return
		}
		user := sessionOf(r).User
		msg, errs := s.changePassword(r.Context(), user, req.Current, req.New, req.New)
		if errs != nil {
			localapi.WriteJSON(w, http.StatusUnprocessableEntity, APIError{Error: "password not changed", Fields: errs})
			return
		}
		s.sessions.deleteUser(user, sessionID(r))
		localapi.WriteJSON(w, http.StatusOK, map[string]string{"result": msg})
	})
	api("/system/backup", "POST", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Secrets    string `json:"secrets"`
			Passphrase string `json:"passphrase"`
			Password   string `json:"password"` // the current one, for a backup with secrets
		}
		if !decodeAPI(w, r, &req) {
			return
		}
		cfg := s.opts.Config
		if req.Secrets != config.SecretsOmitted {
			if cfg = s.reauthorized(w, r, "backup with secrets", req.Password); cfg == nil {
				return
			}
		}
		data, name, err := s.backup(r.Context(), cfg, req.Secrets, req.Passphrase, true)
		if err != nil {
			localapi.WriteError(w, http.StatusUnprocessableEntity, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
		w.Write(data)
	})
	api("/system/restore", "POST", func(w http.ResponseWriter, r *http.Request) {
		data, err := readUpload(r)
		if err != nil {
			localapi.WriteError(w, http.StatusUnprocessableEntity, "restore refused, nothing was changed: "+err.Error())
			return
		}
		cfg := s.reauthorized(w, r, "restore", r.FormValue("password"))
		if cfg == nil {
			return
		}
		if err = s.restore(r.Context(), cfg, data, r.FormValue("passphrase")); err != nil {
			localapi.WriteError(w, http.StatusUnprocessableEntity, "restore refused, nothing was changed: "+err.Error())
			return
		}
		localapi.WriteJSON(w, http.StatusOK, map[string]string{"result": "the backup is the candidate; commit to apply it"})
	})
	api("/system/factory-reset", "POST", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Confirm  string `json:"confirm"`
			Password string `json:"password"` // the current one
		}
		if !decodeAPI(w, r, &req) {
			return
		}
		if req.Confirm != "factory-reset" {
			localapi.WriteError(w, http.StatusUnprocessableEntity, `send {"confirm":"factory-reset","password":"<your current password>"} to confirm`)
			return
		}
		cfg := s.reauthorized(w, r, "factory reset", req.Password)
		if cfg == nil {
			return
		}
		info, err := cfg.FactoryReset(r.Context(), sessionOf(r).User)
		if err != nil {
			localapi.WriteError(w, http.StatusBadGateway, err.Error())
			return
		}
		s.sessions.delete(sessionID(r))
		localapi.WriteJSON(w, http.StatusOK, info)
	})
	api("/system/reboot", "POST", func(w http.ResponseWriter, r *http.Request) {
		if err := s.doReboot(r.Context()); err != nil {
			localapi.WriteError(w, http.StatusBadGateway, err.Error())
			return
		}
		localapi.WriteJSON(w, http.StatusAccepted, map[string]string{"result": "rebooting"})
	})
	api("/services", "GET", func(w http.ResponseWriter, r *http.Request) {
		v := s.logsView(r.Context(), "")
		if v.Error != "" {
			localapi.WriteError(w, http.StatusBadGateway, v.Error)
			return
		}
		localapi.WriteJSON(w, http.StatusOK, v.Services)
	})
	api("/logs/{service}", "GET", func(w http.ResponseWriter, r *http.Request) {
		v := s.logsView(r.Context(), mux.Vars(r)["service"])
		if v.Error != "" {
			localapi.WriteError(w, http.StatusBadGateway, v.Error)
			return
		}
		localapi.WriteJSON(w, http.StatusOK, v)
	})
	api("/changes", "GET", func(w http.ResponseWriter, r *http.Request) {
		c, err := s.changes(r.Context())
		if err != nil {
			localapi.WriteError(w, http.StatusBadGateway, err.Error())
			return
		}
		localapi.WriteJSON(w, http.StatusOK, c)
	})
	api("/commit", "POST", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Message        string `json:"message"`
			ConfirmMinutes int    `json:"confirm_minutes"`
		}
		if !decodeAPI(w, r, &req) {
			return
		}
		d, err := confirmWindow(req.ConfirmMinutes)
		if err != nil {
			localapi.WriteError(w, http.StatusUnprocessableEntity, err.Error())
			return
		}
		info, err := s.opts.Config.Commit(r.Context(), commitRequest(sessionOf(r).User, req.Message, d))
		if err != nil {
			writeConfigError(w, err)
			return
		}
		localapi.WriteJSON(w, http.StatusOK, info)
	})
	api("/confirm", "POST", func(w http.ResponseWriter, r *http.Request) {
		if err := s.opts.Config.Confirm(r.Context()); err != nil {
			writeConfigError(w, err)
			return
		}
		localapi.WriteJSON(w, http.StatusOK, map[string]string{"result": "confirmed"})
	})
	api("/discard", "POST", func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.opts.Config.Discard(r.Context()); err != nil {
			writeConfigError(w, err)
			return
		}
		localapi.WriteJSON(w, http.StatusOK, map[string]string{"result": "discarded"})
	})
	api("/history", "GET", func(w http.ResponseWriter, r *http.Request) {
		h, err := s.opts.Config.History(r.Context())
		if err != nil {
			writeConfigError(w, err)
			return
		}
		localapi.WriteJSON(w, http.StatusOK, h)
	})
	api("/rollback/{rev:[0-9]+}", "POST", func(w http.ResponseWriter, r *http.Request) {
		rev, _ := strconv.ParseUint(mux.Vars(r)["rev"], 10, 64)
		info, err := s.opts.Config.Rollback(r.Context(), rev, sessionOf(r).User+" (web)")
		if err != nil {
			writeConfigError(w, err)
			return
		}
		localapi.WriteJSON(w, http.StatusOK, info)
	})
}

// decodeAPI reads a JSON body strictly. Requiring application/json also
// keeps plain HTML forms on other sites from reaching the API.
func decodeAPI(w http.ResponseWriter, r *http.Request, v any) bool {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		localapi.WriteError(w, http.StatusUnsupportedMediaType, "send the body as application/json")
		return false
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		localapi.WriteError(w, http.StatusBadRequest, "request body: "+err.Error())
		return false
	}
	return true
}

func writeConfigError(w http.ResponseWriter, err error) {
	var ve config.ValidationErrors
	switch {
	case errors.As(err, &ve):
		fields := map[string]string{}
		for _, fe := range ve {
			fields[fe.Path] = fe.Message
		}
		localapi.WriteJSON(w, http.StatusUnprocessableEntity, APIError{Error: "the configuration is not valid", Fields: fields})
	case errors.Is(err, config.ErrNoChanges), errors.Is(err, config.ErrNothingPending), errors.Is(err, config.ErrCandidateChanged):
		localapi.WriteError(w, http.StatusConflict, err.Error())
	case errors.Is(err, config.ErrNoRevision):
		localapi.WriteError(w, http.StatusNotFound, err.Error())
	default:
		localapi.WriteError(w, http.StatusBadGateway, err.Error())
	}
}

// apiValues turns a JSON object of field values (strings, numbers, booleans
// or lists of strings) into form values.
func apiValues(k *kind, body map[string]json.RawMessage) (map[string][]string, formErrors) {
	out := map[string][]string{}
	errs := formErrors{}
	known := map[string]bool{}
	for _, f := range k.Fields {
		known[f.Key] = true
	}
	for key, raw := range body {
		if !known[key] {
			errs.add(key, "Not a field of a "+k.Singular+".")
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			errs.add(key, err.Error())
			continue
		}
		switch x := v.(type) {
		case string:
			out[key] = []string{x}
		case bool:
			out[key] = []string{strconv.FormatBool(x)}
		case float64:
			out[key] = []string{strconv.FormatFloat(x, 'f', -1, 64)}
		case nil:
			out[key] = []string{""}
		case []any:
			list := []string{}
			for _, e := range x {
				s, ok := e.(string)
				if !ok {
					errs.add(key, "List entries must be strings.")
					break
				}
				list = append(list, s)
			}
			out[key] = list
		default:
			errs.add(key, fmt.Sprintf("Cannot use a %T here.", v))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// apiPutElement creates or changes an element from a JSON object of
// fields; absent fields keep their value (or default, when creating).
func (s *Server) apiPutElement(k *kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body map[string]json.RawMessage
		if !decodeAPI(w, r, &body) {
			return
		}
		vals, errs := apiValues(k, body)
		if errs != nil {
			localapi.WriteJSON(w, http.StatusUnprocessableEntity, APIError{Error: "invalid fields", Fields: errs})
			return
		}
		name := mux.Vars(r)["name"]
		creating := false
		if !k.Single {
			cand, err := s.candidate(r.Context())
			if err != nil {
				localapi.WriteError(w, http.StatusBadGateway, err.Error())
				return
			}
			creating = !k.exists(cand.Config, name)
		}
		ferrs, err := s.saveElement(r.Context(), k, name, vals, creating, true)
		switch {
		case err != nil:
			localapi.WriteError(w, http.StatusBadGateway, err.Error())
		case ferrs != nil:
			localapi.WriteJSON(w, http.StatusUnprocessableEntity, APIError{Error: "not saved: the " + k.Singular + " is not valid", Fields: ferrs})
		case creating:
			localapi.WriteJSON(w, http.StatusCreated, map[string]string{"result": "created in the candidate; commit to apply"})
		default:
			localapi.WriteJSON(w, http.StatusOK, map[string]string{"result": "saved in the candidate; commit to apply"})
		}
	}
}

func (s *Server) apiDeleteElement(k *kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := s.deleteElement(r.Context(), k, mux.Vars(r)["name"])
		var inUse *inUseError
		switch {
		case errors.As(err, &inUse):
			localapi.WriteError(w, http.StatusConflict, err.Error())
			return
		case err != nil:
			localapi.WriteError(w, http.StatusNotFound, err.Error())
			return
		}
		localapi.WriteJSON(w, http.StatusOK, map[string]string{"result": "deleted in the candidate; commit to apply"})
	}
}

package cli

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/pki"
	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// runCert is the console's certificate store, the same operations as the
// web UI's Certificates page, into the candidate:
//
//	cert [list]
//	cert ca NAME COMMON-NAME [KEY-TYPE]
//	cert issue CA NAME COMMON-NAME [ID...]             for this box: the key stays in configd
//	cert issue-peer CA NAME COMMON-NAME FILE [ID...]   for a peer: certificate, CA and key to FILE (mode 0600)
//	cert revoke NAME
//	cert import NAME FILE [PASSPHRASE]                 PEM (CA, cert+key, CRL) or PKCS#12
//	cert export NAME FILE                              the certificate, or a CA's CRL with NAME.crl
func runCert(ctx context.Context, s *session, args []string) error {
	ctx, cancel := apiContext(ctx)
	defer cancel()
	sub := "list"
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	done := func(what string, err error) error {
		if err != nil {
			return err
		}
		s.printf("%s Commit to use it.\n", what)
		return nil
	}
	switch {
	case sub == "list" && len(args) == 0:
		return certList(ctx, s)
	case sub == "ca" && (len(args) == 2 || len(args) == 3):
		req := configdapi.CreateCARequest{Name: args[0], CommonName: args[1]}
		if len(args) == 3 {
			req.KeyType = pki.KeyType(args[2])
		}
		_, err := s.configd.CreateCA(ctx, req)
		return done("CA "+args[0]+" created.", err)
	case sub == "issue" && len(args) >= 3:
		_, err := s.configd.IssueCertificate(ctx, configdapi.IssueRequest{CA: args[0], Name: args[1], CommonName: args[2], Names: args[3:]})
		return done("Certificate "+args[1]+" issued for this box.", err)
	case sub == "issue-peer" && len(args) >= 4:
		file := args[3]
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("the bundle's file: %w", err)
		}
		bundle, _, err := s.configd.IssuePeerBundle(ctx, configdapi.IssueRequest{CA: args[0], Name: args[1], CommonName: args[2], Names: args[4:]})
		if err == nil {
			_, err = f.Write(bundle)
			clear(bundle)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(file)
			return err
		}
		return done(fmt.Sprintf("Certificate %s issued; %s holds it, the CA's and its private key: give it to the peer and delete it here.", args[1], file), nil)
	case sub == "revoke" && len(args) == 1:
		_, err := s.configd.RevokeCertificate(ctx, "", args[0])
		return done("Certificate "+args[0]+" revoked; its CA's CRL lists it.", err)
	case sub == "import" && (len(args) == 2 || len(args) == 3):
		st, err := os.Stat(args[1])
		if err != nil {
			return err
		}
		if st.Size() > config.MaxCertPEM {
			return fmt.Errorf("%s: larger than %d KiB", args[1], config.MaxCertPEM>>10)
		}
		data, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		req := configdapi.CertImportRequest{Name: args[0]}
		if len(args) == 3 {
			req.Passphrase = args[2]
		}
		if strings.Contains(string(data), "-----BEGIN") {
			req.PEM = string(data)
		} else {
			req.PKCS12 = base64.StdEncoding.EncodeToString(data)
		}
		_, err = s.configd.ImportCertificate(ctx, req)
		return done("Imported "+args[0]+".", err)
	case sub == "export" && len(args) == 2:
		cand, err := s.configd.Candidate(ctx)
		if err != nil {
			return err
		}
		name, crl := strings.CutSuffix(args[0], ".crl")
		e := cand.Config.Certificate(name)
		if e == nil {
			return fmt.Errorf("no certificate %q in the store", name)
		}
		body := e.Cert
		if crl {
			if e.CRL == "" {
				return fmt.Errorf("%s has no CRL", name)
			}
			body = e.CRL
		}
		if err := os.WriteFile(args[1], []byte(body), 0o644); err != nil {
			return err
		}
		s.printf("Wrote %s.\n", args[1])
		return nil
	}
	return usageError("cert")
}

func certList(ctx context.Context, s *session) error {
	cand, err := s.configd.Candidate(ctx)
	if err != nil {
		return err
	}
	if len(cand.Config.Certificates) == 0 {
		s.printf("No certificates. cert ca NAME COMMON-NAME makes a CA.\n")
		return nil
	}
	s.printf("%-16s %-18s %-32s %-10s %s\n", "NAME", "KIND", "SUBJECT", "UNTIL", "NAMES")
	for _, e := range cand.Config.Certificates {
		kind := "certificate"
		switch {
		case e.CA && e.Key.IsSet():
			kind = "CA (issues here)"
		case e.CA:
			kind = "CA (imported)"
		case e.Key.IsSet():
			kind = "this box"
		case e.Issuer != "":
			kind = "issued to a peer"
		}
		if e.Revoked != "" {
			kind += ", revoked"
		}
		certs, _, _, err := pki.ParsePEM([]byte(e.Cert))
		if err != nil || len(certs) == 0 {
			s.printf("%-16s %-18s (does not parse)\n", e.Name, kind)
			continue
		}
		c := certs[0]
		names := append(append([]string(nil), c.DNSNames...), c.EmailAddresses...)
		for _, ip := range c.IPAddresses {
			names = append(names, ip.String())
		}
		s.printf("%-16s %-18s %-32s %-10s %s\n", e.Name, kind, c.Subject.String(), c.NotAfter.Format("2006-01-02"), strings.Join(names, ","))
	}
	return nil
}

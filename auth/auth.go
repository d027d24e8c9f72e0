// Package auth is jobq's bearer-token authentication, shared by every
// transport on the API listener (the HTTP API, the gRPC/Connect API and the
// web console): loading the tokens, comparing a presented token in
// constant time, and the HTTP middleware that refuses a request without
// one. It imports no transport, so a transport that needs it does not
// import another transport.
package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/jobq/jobq/apitype"
)

// TokensEnv is the environment variable holding bearer tokens,
// comma-separated, for `jobq serve` (read in addition to --auth-token-file).
const TokensEnv = "JOBQ_AUTH_TOKENS"

// MinTokenLen is the shortest accepted bearer token, in bytes.
const MinTokenLen = 16

// ErrNoTokens is returned by LoadTokens when a token file was named
// but holds no token: asking for authentication and getting none must not
// silently leave the API open.
var ErrNoTokens = errors.New("auth: the token file holds no token")

// LoadTokens reads bearer tokens from file (one per line; blank lines
// and lines starting with '#' are skipped; "" for none) and from env (a
// comma-separated list, usually os.Getenv(TokensEnv); "" for none) and
// returns them all. Each token must be at least MinTokenLen bytes of the
// RFC 6750 token alphabet (A–Z a–z 0–9 - . _ ~ + / and trailing =). An empty
// result means authentication is off. Errors name the file and line, never
// the token.
func LoadTokens(file, env string) ([]string, error) {
	var tokens []string
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("auth token file: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for line := 1; sc.Scan(); line++ {
			t := strings.TrimSpace(sc.Text())
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			if err := checkToken(t); err != nil {
				return nil, fmt.Errorf("auth token file %s line %d: %w", file, line, err)
			}
			tokens = append(tokens, t)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("auth token file %s: %w", file, err)
		}
		if len(tokens) == 0 {
			return nil, fmt.Errorf("%w: %s", ErrNoTokens, file)
		}
	}
	for i, t := range strings.Split(env, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if err := checkToken(t); err != nil {
			return nil, fmt.Errorf("%s token %d: %w", TokensEnv, i+1, err)
		}
		tokens = append(tokens, t)
	}
	return tokens, nil
}

func checkToken(t string) error {
	if len(t) < MinTokenLen {
		return fmt.Errorf("a token must be at least %d bytes, got %d", MinTokenLen, len(t))
	}
	body := strings.TrimRight(t, "=")
	if body == "" {
		return errors.New("a token must not be only '='")
	}
	for _, c := range []byte(body) {
		ok := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/", c) >= 0
		if !ok {
			return errors.New("a token may hold only A–Z a–z 0–9 - . _ ~ + / and trailing '='")
		}
	}
	return nil
}

// unauthenticatedPaths stay open without a token so probes keep working.
var unauthenticatedPaths = map[string]bool{"/healthz": true, "/readyz": true}

// ProbePath reports whether path is a probe (/healthz, /readyz), which
// stays open without a token (and, in httpapi.RequireHost, for any Host).
func ProbePath(path string) bool { return unauthenticatedPaths[path] }

// RequireBearer wraps next so that every request except /healthz and
// /readyz must carry "Authorization: Bearer <token>" with one of tokens
// (compared as TokenMatcher does); any other request gets 401 with a JSON
// error body (apitype.ErrorBody, code "unauthenticated", field
// "Authorization"), which gRPC and Connect clients report as
// Unauthenticated. The HTTP API and the gRPC, gRPC-Web and Connect API
// (see app) are served behind it. tokens must be non-empty (see
// LoadTokens).
func RequireBearer(tokens []string, log *slog.Logger, next http.Handler) http.Handler {
	accepted := TokenMatcher(tokens)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unauthenticatedPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		presented, ok := BearerToken(r.Header.Get("Authorization"))
		if ok && accepted(presented) {
			next.ServeHTTP(w, r)
			return
		}
		challenge := `Bearer realm="jobq"`
		msg := `Authorization: required, as "Bearer <token>"`
		if ok {
			challenge += `, error="invalid_token"`
			msg = "Authorization: the bearer token is not accepted"
		}
		log.Warn("unauthenticated request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "token_given", ok)
		w.Header().Set("WWW-Authenticate", challenge)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "unauthenticated", Field: "Authorization", Message: msg}})
	})
}

// TokenMatcher returns a func reporting whether a presented token is one
// of tokens. Presented and configured tokens are compared as SHA-256 digests
// with crypto/subtle, against every configured token without stopping
// early, so the time taken reveals neither which token nor how much of it
// matched. The console checks its session cookie with it.
func TokenMatcher(tokens []string) func(presented string) bool {
	digests := make([][sha256.Size]byte, len(tokens))
	for i, t := range tokens {
		digests[i] = sha256.Sum256([]byte(t))
	}
	return func(presented string) bool {
		d := sha256.Sum256([]byte(presented))
		match := 0
		for i := range digests {
			match |= subtle.ConstantTimeCompare(d[:], digests[i][:])
		}
		return match == 1
	}
}

// BearerToken extracts the token of an "Authorization: Bearer <token>"
// header; ok is false when there is none. The scheme is case-insensitive
// (RFC 7235).
func BearerToken(h string) (token string, ok bool) {
	scheme, tok, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

package httpapi

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/jobq/jobq/apitype"
)

// AuthTokensEnv is the environment variable holding bearer tokens,
// comma-separated, for `jobq serve` (read in addition to --auth-token-file).
const AuthTokensEnv = "JOBQ_AUTH_TOKENS"

// MinAuthTokenLen is the shortest accepted bearer token, in bytes.
const MinAuthTokenLen = 16

// ErrNoAuthTokens is returned by LoadAuthTokens when a token file was named
// but holds no token: asking for authentication and getting none must not
// silently leave the API open.
var ErrNoAuthTokens = errors.New("auth: the token file holds no token")

// LoadAuthTokens reads bearer tokens from file (one per line; blank lines
// and lines starting with '#' are skipped; "" for none) and from env (a
// comma-separated list, usually os.Getenv(AuthTokensEnv); "" for none) and
// returns them all. Each token must be at least MinAuthTokenLen bytes of the
// RFC 6750 token alphabet (A–Z a–z 0–9 - . _ ~ + / and trailing =). An empty
// result means authentication is off. Errors name the file and line, never
// the token.
func LoadAuthTokens(file, env string) ([]string, error) {
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
			return nil, fmt.Errorf("%w: %s", ErrNoAuthTokens, file)
		}
	}
	for i, t := range strings.Split(env, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if err := checkToken(t); err != nil {
			return nil, fmt.Errorf("%s token %d: %w", AuthTokensEnv, i+1, err)
		}
		tokens = append(tokens, t)
	}
	return tokens, nil
}

func checkToken(t string) error {
	if len(t) < MinAuthTokenLen {
		return fmt.Errorf("a token must be at least %d bytes, got %d", MinAuthTokenLen, len(t))
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

// RequireBearer applies the API's bearer-token check to handlers served
// beside it on the same listener (the gRPC, gRPC-Web and Connect API, see
// app): a request without "Authorization: Bearer <token>" naming one of
// tokens gets 401 with a JSON error body, which gRPC and Connect clients
// report as Unauthenticated. tokens must be non-empty (see LoadAuthTokens).
func RequireBearer(tokens []string, log *slog.Logger, next http.Handler) http.Handler {
	return requireBearer(tokens, log, next)
}

// requireBearer wraps next so that every request except /healthz and
// /readyz must carry "Authorization: Bearer <token>" with one of tokens
// (compared as TokenMatcher does).
func requireBearer(tokens []string, log *slog.Logger, next http.Handler) http.Handler {
	accepted := TokenMatcher(tokens)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unauthenticatedPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		presented, ok := bearerToken(r.Header.Get("Authorization"))
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
		writeJSON(w, http.StatusUnauthorized, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "unauthenticated", Field: "Authorization", Message: msg}})
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
// header; ok is false when there is none.
func BearerToken(h string) (token string, ok bool) { return bearerToken(h) }

// bearerToken extracts the token of an "Authorization: Bearer <token>"
// header; the scheme is case-insensitive (RFC 7235).
func bearerToken(h string) (string, bool) {
	scheme, tok, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

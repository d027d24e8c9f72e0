package service

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// WorkerTokensEnv is the environment variable holding worker tokens for
// `jobq serve`, entries separated by ';' (read in addition to
// --worker-token-file).
const WorkerTokensEnv = "JOBQ_WORKER_TOKENS"

// MinWorkerTokenLen is the shortest accepted worker token, in bytes.
const MinWorkerTokenLen = 16

// WorkerCredential is one worker token and its scope (docs/workers.md).
type WorkerCredential struct {
	Token string
	Scope WorkerScope
}

// WorkerScope is what a worker token may do: fetch, heartbeat, log, report
// progress and complete jobs of Types (AllTypes: every remote type), and
// with Submit submit, with Read read jobs of those types.
type WorkerScope struct {
	Types    []string
	AllTypes bool
	Submit   bool
	Read     bool
}

// Allows reports whether the scope covers jobType.
func (s WorkerScope) Allows(jobType string) bool {
	return s.AllTypes || slices.Contains(s.Types, jobType)
}

// String describes the scope for error messages (never the token).
func (s WorkerScope) String() string {
	types := strings.Join(s.Types, ",")
	if s.AllTypes {
		types = "every remote job type"
	}
	var grants []string
	if s.Submit {
		grants = append(grants, "submit")
	}
	if s.Read {
		grants = append(grants, "read")
	}
	g := "no grants"
	if len(grants) > 0 {
		g = "grants " + strings.Join(grants, ",")
	}
	return "job types " + types + "; " + g
}

// LoadWorkerTokens reads worker tokens from file (one entry per line:
// token, job types comma-separated or "*", optional grants "submit",
// "read" or "submit,read", separated by blanks; blank lines and '#'
// comments are skipped; "" for none) and from env (entries separated by
// ';', usually os.Getenv(WorkerTokensEnv)). Errors name the file and line
// or the entry, never the token.
func LoadWorkerTokens(file, env string) ([]WorkerCredential, error) {
	var out []WorkerCredential
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("worker token file: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		n := 0
		for line := 1; sc.Scan(); line++ {
			t := strings.TrimSpace(sc.Text())
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			c, err := parseWorkerEntry(t)
			if err != nil {
				return nil, fmt.Errorf("worker token file %s line %d: %w", file, line, err)
			}
			out = append(out, c)
			n++
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("worker token file %s: %w", file, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("worker token file %s holds no token", file)
		}
	}
	for i, e := range strings.Split(env, ";") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		c, err := parseWorkerEntry(e)
		if err != nil {
			return nil, fmt.Errorf("%s entry %d: %w", WorkerTokensEnv, i+1, err)
		}
		out = append(out, c)
	}
	seen := map[string]bool{}
	for i, c := range out {
		if seen[c.Token] {
			return nil, fmt.Errorf("worker token %d: the same token is given twice", i+1)
		}
		seen[c.Token] = true
	}
	return out, nil
}

func parseWorkerEntry(e string) (WorkerCredential, error) {
	f := strings.Fields(e)
	if len(f) < 2 || len(f) > 3 {
		return WorkerCredential{}, errors.New("an entry is: <token> <job types, comma-separated, or *> [submit|read|submit,read]")
	}
	if err := checkWorkerToken(f[0]); err != nil {
		return WorkerCredential{}, err
	}
	c := WorkerCredential{Token: f[0]}
	if f[1] == "*" {
		c.Scope.AllTypes = true
	} else {
		for _, t := range strings.Split(f[1], ",") {
			if t == "" || len([]rune(t)) > MaxJobTypeRunes {
				return WorkerCredential{}, fmt.Errorf("job types: each must be 1–%d characters", MaxJobTypeRunes)
			}
			c.Scope.Types = append(c.Scope.Types, t)
		}
	}
	if len(f) == 3 {
		for _, g := range strings.Split(f[2], ",") {
			switch g {
			case "submit":
				c.Scope.Submit = true
			case "read":
				c.Scope.Read = true
			default:
				return WorkerCredential{}, fmt.Errorf("grants: %q is not a grant (submit, read)", g)
			}
		}
	}
	return c, nil
}

func checkWorkerToken(t string) error {
	if len(t) < MinWorkerTokenLen {
		return fmt.Errorf("a worker token must be at least %d bytes, got %d", MinWorkerTokenLen, len(t))
	}
	for _, ch := range []byte(strings.TrimRight(t, "=")) {
		ok := ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || strings.IndexByte("-._~+/", ch) >= 0
		if !ok {
			return errors.New("a worker token may hold only A–Z a–z 0–9 - . _ ~ + / and trailing '='")
		}
	}
	return nil
}

// Caller is who sent a request: an admin (or anyone, when the API has no
// tokens), or a worker token with its scope.
type Caller struct {
	// Worker is the worker token's scope; nil for an admin.
	Worker *WorkerScope
}

type callerKey struct{}

// WithCaller returns ctx carrying c (set by the transports' authentication).
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller of ctx: an admin when none was set.
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// Forbidden is a request the caller's credentials do not allow (HTTP 403,
// gRPC PermissionDenied). Field names what was refused.
type Forbidden struct {
	Field string
	Rule  string
}

func (e *Forbidden) Error() string { return e.Field + ": " + e.Rule }

// checkSubmitScope refuses a submit of jobType by a worker token without
// the submit grant or outside its types.
func (s *Service) checkSubmitScope(ctx context.Context, jobType string) error {
	c := CallerFrom(ctx)
	if c.Worker == nil {
		return nil
	}
	if !c.Worker.Submit {
		return &Forbidden{Field: "Authorization", Rule: "this worker token may not submit jobs (" + c.Worker.String() + ")"}
	}
	if !s.scopeAllows(*c.Worker, jobType) {
		return &Forbidden{Field: "job_type", Rule: fmt.Sprintf("%q is outside this worker token's scope (%s)", jobType, c.Worker.String())}
	}
	return nil
}

// checkReadScope refuses a read of a job of jobType by a worker token
// without the read grant or outside its types.
func (s *Service) checkReadScope(ctx context.Context, jobType string) error {
	c := CallerFrom(ctx)
	if c.Worker == nil {
		return nil
	}
	if !c.Worker.Read {
		return &Forbidden{Field: "Authorization", Rule: "this worker token may not read jobs (" + c.Worker.String() + ")"}
	}
	if !s.scopeAllows(*c.Worker, jobType) {
		return &Forbidden{Field: "id", Rule: "the job's type is outside this worker token's scope (" + c.Worker.String() + ")"}
	}
	return nil
}

// scopeAllows reports whether scope covers jobType: one of its types, or
// any remote type for "*".
func (s *Service) scopeAllows(scope WorkerScope, jobType string) bool {
	if scope.AllTypes {
		return s.isRemote != nil && s.isRemote(jobType)
	}
	return scope.Allows(jobType)
}

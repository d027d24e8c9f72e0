package auth_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobq/jobq/auth"
)

const (
	tokenA = "tokA-0123456789abcdef"
	tokenB = "tokB-fedcba9876543210=="
)

func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# ops team\n"+tokenA+"\n\n  "+tokenB+"  \n")
	got, err := auth.LoadTokens(good, " tokE-0123456789abcdef , ")
	if err != nil {
		t.Fatalf("LoadTokens: %v", err)
	}
	want := []string{tokenA, tokenB, "tokE-0123456789abcdef"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("tokens = %q, want %q", got, want)
	}
	if got, err := auth.LoadTokens("", ""); err != nil || len(got) != 0 {
		t.Fatalf("no file, no env: %q, %v; want none (auth off)", got, err)
	}
	secret := "short-secret"
	bad := []struct {
		name, file, env, want string
	}{
		{"empty file", write("empty", "# nothing\n\n"), "", "holds no token"},
		{"missing file", filepath.Join(dir, "nope"), "", "no such file"},
		{"short token in file", write("short", secret+"\n"), "", "line 1: a token must be at least 16 bytes"},
		{"space in token", write("space", "abcdefgh ijklmnopq\n"), "", "line 1: a token may hold only"},
		{"short token in env", "", tokenA + "," + secret, "JOBQ_AUTH_TOKENS token 2: a token must be at least 16 bytes"},
		{"quote in env token", "", `abcdefghijklmnop"q`, "may hold only"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := auth.LoadTokens(c.file, c.env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error echoes the token: %v", err)
			}
		})
	}
	if _, err := auth.LoadTokens(write("empty2", ""), ""); !errors.Is(err, auth.ErrNoTokens) {
		t.Fatalf("empty file: %v, want ErrNoTokens", err)
	}
}

// TestTokenMatcherAndBearerToken checks what the console and the
// middleware share: the header parse and the constant-time comparison.
func TestTokenMatcherAndBearerToken(t *testing.T) {
	accepted := auth.TokenMatcher([]string{tokenA, tokenB})
	for _, c := range []struct {
		header string
		tok    string
		ok     bool
		match  bool
	}{
		{"Bearer " + tokenA, tokenA, true, true},
		{"bearer " + tokenB, tokenB, true, true},
		{"Bearer  " + tokenA + " ", tokenA, true, true},
		{"Bearer " + tokenA[:len(tokenA)-1], tokenA[:len(tokenA)-1], true, false},
		{"Basic " + tokenA, "", false, false},
		{"Bearer ", "", false, false},
		{tokenA, "", false, false},
	} {
		tok, ok := auth.BearerToken(c.header)
		if tok != c.tok || ok != c.ok {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", c.header, tok, ok, c.tok, c.ok)
		}
		if ok && accepted(tok) != c.match {
			t.Errorf("TokenMatcher(%q) = %v, want %v", tok, !c.match, c.match)
		}
	}
}

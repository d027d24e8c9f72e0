package egress

import (
	"fmt"
	"os"
	"strings"
)

// LoadSecrets reads signing secrets: file (one "NAME SECRET" per line, #
// comments; "" for none) and env, the value of the environment variable
// envName ("NAME=SECRET" entries separated by ";"). A secret must be at
// least 16 bytes. Errors start with what (e.g. "callout secrets") and name
// the line, never a secret.
func LoadSecrets(what, envName, file, env string) (map[string][]byte, error) {
	out := map[string][]byte{}
	add := func(where, name, secret string) error {
		if name == "" || len(secret) < 16 {
			return fmt.Errorf("%s: %s: want NAME and a secret of at least 16 bytes", what, where)
		}
		out[name] = []byte(secret)
		return nil
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			name, secret, _ := strings.Cut(line, " ")
			if err := add(fmt.Sprintf("%s line %d", file, i+1), name, strings.TrimSpace(secret)); err != nil {
				return nil, err
			}
		}
	}
	for i, e := range strings.Split(env, ";") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		name, secret, _ := strings.Cut(e, "=")
		if err := add(fmt.Sprintf("%s entry %d", envName, i+1), name, secret); err != nil {
			return nil, err
		}
	}
	return out, nil
}

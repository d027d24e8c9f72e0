package main

import (
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// --claim-slots: 0 is the default (4), a negative number turns the gate off,
// more than 64 (the claim_gate table's rows) and a non-number are refused
// with an error that names the setting and the rule.
func TestServeClaimSlotsFlag(t *testing.T) {
	for _, tc := range []struct {
		arg     string
		want    int    // ClaimSlots after defaults when accepted
		wantErr string // substring of the error when refused
	}{
		{arg: "1", want: 1},
		{arg: "64", want: 64},
		{arg: "0", want: 4},
		{arg: "-1", want: -1},
		{arg: "65", wantErr: "claim slots: must be at most 64 (negative: no gate), got 65"},
		{arg: "1000000", wantErr: "claim slots: must be at most 64"},
		{arg: "abc", wantErr: `--claim-slots: expected a valid 64 bit int but got "abc"`},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			var cli CLI
			p, err := kong.New(&cli, kong.Name("jobq"), kong.Vars{"version": "test"}, defaultVars())
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Parse(negativeValues([]string{"serve", "--dsn", "x", "--claim-slots", tc.arg}))
			if err == nil {
				c, verr := cli.Serve.SchedulerConfig()
				err = verr
				if err == nil && c.WithDefaults().ClaimSlots != tc.want {
					t.Fatalf("--claim-slots %s: ClaimSlots %d, want %d", tc.arg, c.WithDefaults().ClaimSlots, tc.want)
				}
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("--claim-slots %s: %v", tc.arg, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("--claim-slots %s: error %v, want one containing %q", tc.arg, err, tc.wantErr)
			}
		})
	}
}

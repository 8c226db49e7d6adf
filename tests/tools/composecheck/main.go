// composecheck loads a compose file with compose-go, the loader of Docker Compose v2 itself:
// YAML parsing, the compose specification's JSON schema, interpolation, profiles and the
// consistency checks (unknown services in depends_on, undefined volumes and networks, ...).
// It prints the resolved project as JSON on success and the loader's error on failure (exit 1).
//
//	go run . [-profile NAME ...] FILE
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var profiles listFlag
	flag.Var(&profiles, "profile", "profile to enable (repeatable; * for every profile)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: composecheck [-profile NAME ...] FILE")
		os.Exit(2)
	}
	options, err := cli.NewProjectOptions(flag.Args(),
		cli.WithOsEnv,
		cli.WithProfiles(profiles),
		cli.WithInterpolation(true),
		cli.WithNormalization(true),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true),
	)
	if err == nil {
		project, loadErr := options.LoadProject(context.Background())
		err = loadErr
		if err == nil {
			out, marshalErr := project.MarshalJSON()
			if err = marshalErr; err == nil {
				os.Stdout.Write(append(out, '\n'))
				return
			}
		}
	}
	fmt.Fprintln(os.Stderr, "composecheck:", err)
	os.Exit(1)
}

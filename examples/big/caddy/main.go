// Command caddy is the Caddy web server (github.com/caddyserver/caddy/v2)
// with its standard modules, built the way xcaddy builds it: a main package
// that imports the modules and calls caddycmd.Main. It is the big service of
// examples/big.json, a real server with over 30 MiB of text; it lives in its
// own module so that nvboot's go.mod does not carry Caddy's dependencies.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func main() { caddycmd.Main() }

package token

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
)

// Minter is the controller call `tide token` makes; *client.Client
// implements it. It is not part of cmdutil.API, which every command's
// fake would then need.
type Minter interface {
	Token(ctx context.Context, req api.TokenRequest) (api.TokenResponse, error)
}

var _ Minter = (*client.Client)(nil)

// Options is one run of tide token.
type Options struct {
	IO  *cmdutil.IOStreams
	API func() (cmdutil.API, error)

	// Lifespan is as given ("" = the controller's default); Username
	// names another user (operators only).
	Lifespan string
	Username string
}

// NewCmd returns `tide token [--lifespan=DURATION] [--username=USER]`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	o := &Options{IO: f.IO, API: f.API}
	cmd := &cobra.Command{
		Use:   "token [--lifespan=DURATION] [--username=USER]",
		Short: "Get a token (JWT) for the controller's TCP API",
		Long: `token asks the controller for a JSON Web Token and prints it as
TIDE_JWT=<token>, as scontrol token prints SLURM_JWT=<token>.

With TIDE_CONTROLLER=host:port (the controller's api_addr) and TIDE_JWT set,
every command sends the token instead of a MUNGE credential; programs send it
as "Authorization: Bearer <token>":

  export $(tide token --lifespan=2h)
  curl -H "Authorization: Bearer $TIDE_JWT" http://ctl:6820/api/v1/jobs

The token is for the caller; operators may ask for another user's
(--username). Its lifespan defaults to 30 minutes and is at most the
controller's jwt.max_lifespan; a token asked for with a token expires no
later than that one. Whoever holds the token acts as its user until it
expires: keep it like a password.

The Slurm forms "tide token lifespan=SECONDS username=USER" work too.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				k, v, ok := strings.Cut(a, "=")
				switch {
				case ok && strings.EqualFold(k, "lifespan") && !cmd.Flags().Changed("lifespan"):
					o.Lifespan = v
				case ok && strings.EqualFold(k, "username") && !cmd.Flags().Changed("username"):
					o.Username = v
				default:
					return cmdutil.Usagef("unexpected argument %q (tide token takes --lifespan and --username)", a)
				}
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return o.Run(ctx)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Lifespan, "lifespan", "", "how long the token lives: a duration (90m, 2h) or seconds (default 30m)")
	fl.StringVar(&o.Username, "username", "", "the user the token is for (operators only; default: you)")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cmdutil.Usagef("%s", err) })
	return cmd
}

// ParseLifespan reads a lifespan: a Go duration ("90m", "2h") or whole
// seconds ("3600", as scontrol token takes it), of at least a second.
func ParseLifespan(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.ParseInt(v, 10, 64)
		if nerr != nil || n > int64((1<<63-1)/time.Second) {
			return 0, fmt.Errorf("invalid lifespan %q: not a duration (90m, 2h) or a number of seconds", v)
		}
		d = time.Duration(n) * time.Second
	}
	if d < time.Second {
		return 0, fmt.Errorf("invalid lifespan %q: must be at least 1s", v)
	}
	return d, nil
}

// Run mints the token and prints it.
func (o *Options) Run(ctx context.Context) error {
	var req api.TokenRequest
	if o.Lifespan != "" {
		d, err := ParseLifespan(o.Lifespan)
		if err != nil {
			return cmdutil.Usagef("%v", err)
		}
		req.LifespanS = int64((d + time.Second - 1) / time.Second)
	}
	req.User = o.Username
	a, err := o.API()
	if err != nil {
		return err
	}
	m, ok := a.(Minter)
	if !ok {
		return fmt.Errorf("this client cannot ask for tokens")
	}
	resp, err := m.Token(ctx, req)
	if err != nil {
		return fmt.Errorf("get a token: %w", err)
	}
	// The controller's token is base64url and dots; anything else
	// would not be one to print into a shell's environment.
	if _, err := client.ParseBearer(resp.Token); err != nil {
		return fmt.Errorf("the controller answered a malformed token: %w", err)
	}
	fmt.Fprintf(o.IO.Out, "%s=%s\n", client.JWTEnv, resp.Token)
	return nil
}

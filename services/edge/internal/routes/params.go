package routes

import (
	"strconv"

	"github.com/labstack/echo/v4"
)

// hexParam checks a path parameter that is 0x and digits hex digits (any
// case): proposal ids and transaction hashes (64), wallet addresses (40).
// A malformed one names nothing, so it is 404, the only client error the
// contract allows on these routes.
func hexParam(name string, digits int) func(echo.Context) error {
	return func(c echo.Context) error {
		if !isHex(c.Param(name), digits) {
			return newError(CodeNotFound, "%s must be 0x followed by %d hex digits", name, digits)
		}
		return nil
	}
}

func isHex(s string, digits int) bool {
	if len(s) != 2+digits || s[0] != '0' || s[1] != 'x' {
		return false
	}
	for _, c := range s[2:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// limitParam checks the optional query parameter limit: an integer from lo
// to hi (hi 0: no upper bound). Given at all, it must be one: an empty or
// repeated limit is refused rather than guessed at.
func limitParam(lo, hi int) func(echo.Context) error {
	return func(c echo.Context) error {
		values, given := c.QueryParams()["limit"]
		if !given {
			return nil
		}
		n, err := strconv.Atoi(values[0])
		if len(values) != 1 || err != nil || n < lo || (hi > 0 && n > hi) {
			e := newError(CodeInvalidParameter, "limit must be one integer of at least %d", lo)
			if hi > 0 {
				e = newError(CodeInvalidParameter, "limit must be one integer from %d to %d", lo, hi)
			}
			return e.with("parameter", "limit")
		}
		return nil
	}
}

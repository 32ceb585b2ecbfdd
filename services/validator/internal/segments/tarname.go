package segments

import (
	"fmt"
	"strconv"
	"strings"
)

// tarName names a TAR file as the architecture does: data%05d%c.tar, the
// number being its place among its generation's TAR files (0 the oldest)
// and the letter its generation mod 26. Only two consecutive generations
// are kept (ADR 0033), so names are unique, and cleanup renames nothing.
func tarName(number int, generation uint32) string {
	return fmt.Sprintf("data%05d%c.tar", number, 'a'+rune(generation%26))
}

// parseTarName returns the number a TAR file name gives, ok false unless
// name is one tarName writes: data7a.tar or data+0001a.tar name nothing.
func parseTarName(name string) (int, bool) {
	body, prefixed := strings.CutPrefix(name, "data")
	body, suffixed := strings.CutSuffix(body, ".tar")
	if !prefixed || !suffixed || len(body) < 6 {
		return 0, false
	}
	letter := body[len(body)-1]
	n, err := strconv.Atoi(body[:len(body)-1])
	if err != nil || n < 0 || letter < 'a' || letter > 'z' {
		return 0, false
	}
	return n, tarName(n, uint32(letter-'a')) == name
}

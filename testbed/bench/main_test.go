package bench

import (
	"testing"

	"github.com/jobq/jobq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

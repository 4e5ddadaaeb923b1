#pragma once
// stub: the sweep manager/worker (being written)

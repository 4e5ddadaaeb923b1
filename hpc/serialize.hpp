#pragma once
// Boost.Serialization of the plain structs that travel between ranks.
#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>

#include "genemask/kmer/kmer_count.hpp"
#include "genemask/corpus/shard_build.hpp"

namespace boost::serialization {
template <class A>
void serialize(A& ar, genemask::RecordSegment& s, const unsigned int) {
  ar & s.voff & s.name & s.bases;
}
template <class A>
void serialize(A& ar, genemask::RecordInfo& r, const unsigned int) {
  ar & r.name & r.length & r.voff;
}
template <class A>
void serialize(A& ar, genemask::StretchStart& s, const unsigned int) {
  ar & s.voff & s.chrom & s.base_offset;
}
template <class A>
void serialize(A& ar, genemask::ShardFileInfo& f, const unsigned int) {
  ar & f.file & f.split & f.sha256 & f.samples & f.tokens & f.first_sample & f.last_sample;
}
template <class A>
void serialize(A& ar, genemask::ShardBuildStats& s, const unsigned int) {
  ar & s.candidates & s.kept & s.dropped_non_acgt & s.samples_train & s.samples_valid & s.tokens_train &
      s.tokens_valid & s.files & s.genome_samples_train & s.genome_samples_valid & s.genome_tokens_train &
      s.genome_tokens_valid;
}
}  // namespace boost::serialization

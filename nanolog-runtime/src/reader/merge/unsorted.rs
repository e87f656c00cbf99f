//! The file-order walk ([`Merge::unsorted`]): each file's entries in the
//! order they were written, no heap.

use super::*;

impl<'a> Merge<'a> {
    pub(super) fn next_unsorted(&mut self) -> Option<Event<'a>> {
        loop {
            let file = self.files.get(self.u_file)?;
            if let Some(ext) = self.u_extent.as_mut() {
                let next = self
                    .narrowed
                    .then(|| (&self.allowed[self.u_file][..], &self.plans[self.u_file][..]));
                let clock = &self.clocks[self.u_file];
                let until = self.filter.until_ns.is_some();
                let rec = match next {
                    Some(n) => extent_next_allowed(ext, clock, n, until, &mut self.errors),
                    None => extent_next(ext, clock, &mut self.errors),
                };
                match rec {
                    Some(rec) if self.keep_record(self.u_file, &rec) == Some(true) => {
                        self.u_emitted = true;
                        return Some(Event::Record(rec));
                    }
                    Some(_) => {}
                    None => self.u_extent = None,
                }
                continue;
            }
            let next = file.order().get(self.u_item);
            let Some(&(thread, item)) = next.filter(|(_, it)| !self.past_max(file, it)) else {
                file.done_with(&mut self.behind[self.u_file].0, usize::MAX);
                self.u_file += 1;
                self.u_item = self.files.get(self.u_file).map_or(0, |f| {
                    f.order()
                        .partition_point(|(_, it)| f.offset_of(it) < self.filter.min_offset)
                });
                continue;
            };
            self.u_item += 1;
            if !self.filter.wants_thread(file, thread) {
                continue;
            }
            match self.open_item(file, self.u_file, thread, item) {
                Opened::Extent(e, held) => {
                    // (In file order: what is behind is read.)
                    file.passed(&mut self.behind[self.u_file].0, file.offset_of(&item));
                    self.u_extent = Some(e);
                    let old = std::mem::replace(&mut self.u_held, held);
                    if std::mem::take(&mut self.u_emitted) {
                        self.left(old);
                    }
                }
                Opened::Gap(ev) => return Some(ev),
                Opened::Nothing => {}
            }
        }
    }
}
